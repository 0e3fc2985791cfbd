package main

// Stripe API, "Create a refund" (form-encoded, as every Stripe POST):
// https://docs.stripe.com/api/refunds/create

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stripeChargeAmount is the amount of every charge in the sandbox, in the currency's smallest
// unit; a refund without amount refunds that much. The sandbox keeps no balance: a charge can be
// refunded any number of times, so duplicate refunds show in the counter rather than as errors.
const stripeChargeAmount = 10000

// stripeRefund is Stripe's refund object, with the fields a client usually reads.
type stripeRefund struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	BalanceTransaction string            `json:"balance_transaction"`
	Charge             *string           `json:"charge"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Metadata           map[string]string `json:"metadata"`
	PaymentIntent      *string           `json:"payment_intent"`
	Reason             *string           `json:"reason"`
	ReceiptNumber      *string           `json:"receipt_number"`
	Status             string            `json:"status"`
}

// stripeError is Stripe's error body: {"error":{"type":"invalid_request_error","message":...}}.
func stripeError(code, param, message string) reply {
	e := map[string]string{"type": "invalid_request_error", "message": message}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	return reply{status: http.StatusBadRequest, body: map[string]any{"error": e}}
}

// stripeCreateRefund plays POST /v1/refunds with
// charge=ch_...&amount=1000&reason=requested_by_customer&metadata[order]=6735 (or payment_intent=pi_...):
// 200 {"id":"re_...","object":"refund","amount":1000,"charge":"ch_...","status":"succeeded",...}.
// A missing charge and payment_intent, a bad amount or reason get 400 and no effect.
func (s *sandbox) stripeCreateRefund(c *call) reply {
	form, err := url.ParseQuery(string(c.body))
	if err != nil {
		return stripeError("", "", "Invalid request: the body is not application/x-www-form-urlencoded: "+err.Error())
	}
	charge, intent := form.Get("charge"), form.Get("payment_intent")
	switch {
	case charge == "" && intent == "":
		return stripeError("parameter_missing", "", "One of the following params should be provided for this request: payment_intent or charge.")
	case charge != "" && !strings.HasPrefix(charge, "ch_") && !strings.HasPrefix(charge, "py_"):
		return stripeError("resource_missing", "charge", "No such charge: '"+charge+"'")
	case intent != "" && !strings.HasPrefix(intent, "pi_"):
		return stripeError("resource_missing", "payment_intent", "No such payment_intent: '"+intent+"'")
	}
	amount := int64(stripeChargeAmount)
	if v := form.Get("amount"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return stripeError("parameter_invalid_integer", "amount", "Invalid positive integer: "+v)
		}
		if n > stripeChargeAmount {
			return stripeError("amount_too_large", "amount", "Refund amount ("+v+") is greater than charge amount ("+strconv.Itoa(stripeChargeAmount)+")")
		}
		amount = n
	}
	reason := form.Get("reason")
	if reason != "" && !slices.Contains([]string{"duplicate", "fraudulent", "requested_by_customer"}, reason) {
		return stripeError("parameter_invalid_string", "reason", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
	}
	metadata := map[string]string{}
	for k, vs := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(vs) > 0 {
			metadata[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}

	refund := stripeRefund{
		ID:                 "re_" + randomToken(24),
		Object:             "refund",
		Amount:             amount,
		BalanceTransaction: "txn_" + randomToken(24),
		Charge:             optional(charge),
		Created:            time.Now().Unix(),
		Currency:           "usd",
		Metadata:           metadata,
		PaymentIntent:      optional(intent),
		Reason:             optional(reason),
		Status:             "succeeded",
	}
	s.commit(stripeCreateRefund, func() {})
	return reply{status: http.StatusOK, body: refund, effect: true, id: refund.ID}
}
