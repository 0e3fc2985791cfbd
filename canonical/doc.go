// Package canonical turns an HTTP request into its canonical document and effect fingerprint
// (docs/contract.md §3).
//
// The canonical document of a request is the canonical JSON text of the object
//
//	{"body": ..., "headers": {...}, "method": "...", "path": {...}, "query": {...}, "tool": "..."}
//
// where "body" is the request body projected by the route's [Fields], "headers" and "query" hold
// the listed request headers and query parameters that are present, and "path" holds every path
// parameter. The fingerprint is "sha256:" followed by the lowercase hex SHA-256 of that document
// ([Fingerprint]).
//
// # Rules
//
// A route's [Fields] say which parts of a request are its effect. Beside the body members to
// include or exclude and the listed query parameters and headers, they hold rules that make
// genuine retries of real APIs compare equal: a Format that reads the body as JSON, a form, a
// GraphQL request (its document parsed and printed canonically) or a JSON-RPC request (its id
// dropped); Defaults for absent members; Normalize for strings whose white space, case or
// normalization form does not matter; and Sets for arrays whose order and duplicates do not
// matter. They apply in the order format, defaults, exclude, normalize, sets, include
// ([Canonicalizer.Document] tells the details). [Canonicalizer.Explain] returns the document with
// the steps that made it, and [Canonicalizer.DifferingFields] names, without values, where two
// documents differ, for a conflict to explain itself.
//
// # Canonical JSON
//
// Canonical JSON follows RFC 8785 (JSON Canonicalization Scheme) for everything but numbers:
// object members are sorted by the UTF-16 code units of their names, there is no insignificant
// white space, and strings are written with the minimal RFC 8785 escapes (\" \\ \b \t \n \f \r,
// \u00xx in lowercase hex for the other control characters, every other character as UTF-8).
// Input must be one JSON text (RFC 8259) in UTF-8: an object with a duplicated member name,
// invalid UTF-8, an escaped lone surrogate, nesting deeper than 10000 or data after the value is
// an error.
//
// Numbers are never rounded through float64: two numbers are equal when their exact decimal values
// are equal (1, 1.0, 1e0 and 10e-1 are one number; -0 is 0; 9007199254740993 is not
// 9007199254740992). Each decimal value has exactly one form, the layout of ECMAScript's
// Number::toString (the layout RFC 8785 §3.2.2.3 uses) applied to the exact significant digits of
// the value instead of the shortest float64 digits. With the value written as d₁d₂…dₖ × 10^(n−k)
// (k significant digits, no trailing zeros; n is the position of the decimal point), the form is
//
//   - 0 for zero (the sign of -0 is dropped);
//   - the digits followed by n−k zeros when k ≤ n ≤ 21 (integers below 10²¹): 100, 9007199254740993;
//   - the digits with a decimal point after the first n when 0 < n < k and n ≤ 21: 1.5, 123.456;
//   - "0." followed by −n zeros and the digits when −6 < n ≤ 0: 0.1, 0.000001;
//   - otherwise d₁[.d₂…dₖ]e±(n−1): 1e+21, 1.2345678901234567890123e+22, 1e-7, 1e+400;
//
// prefixed with "-" when negative. Where the value has a float64 whose shortest form has the same
// digits, this is exactly the RFC 8785 form. The exponent is kept as decimal text, so numbers such
// as 1e999999999999999999 cost time and memory linear in their length only.
package canonical
