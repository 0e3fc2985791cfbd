package canonical

import "fmt"

// The formats of Fields.Format.
const (
	FormatJSON      = "json"
	FormatForm      = "form"
	FormatGraphQL   = "graphql"
	FormatJSONRPC   = "jsonrpc"
	FormatMultipart = "multipart"
)

// CheckFormat reports whether format is a format of Fields.Format: "" (by Content-Type), json,
// form, multipart, graphql or jsonrpc (case-sensitive). The error quotes format, e.g. `"xml":
// unknown format (want json, form, multipart, graphql or jsonrpc)`.
func CheckFormat(format string) error {
	switch format {
	case "", FormatJSON, FormatForm, FormatMultipart, FormatGraphQL, FormatJSONRPC:
		return nil
	}
	return fmt.Errorf("%q: unknown format (want json, form, multipart, graphql or jsonrpc)", format)
}
