package provider

import (
	"bytes"
	"net/http"
)

// woocommercePing answers the unsigned ping WooCommerce posts when a
// webhook is created or activated, the form body "webhook_id=<id>", with
// 200 and nothing stored: WooCommerce refuses to activate a webhook whose
// URL does not answer it 200. Anyone may send it; it reaches nothing.
// https://github.com/woocommerce/woocommerce/blob/trunk/plugins/woocommerce/includes/class-wc-webhook.php (deliver_ping)
var woocommercePing = &handshake{
	match: func(r *Request) bool {
		id, ok := bytes.CutPrefix(r.Body, []byte("webhook_id="))
		if !ok || len(id) > 20 || r.Method != http.MethodPost || r.Header.Get("X-WC-Webhook-Signature") != "" {
			return false
		}
		_, digits := parseUnix(string(id))
		return digits
	},
	check: func(*signed, *Request) error { return nil },
	answer: func(*signed, *Request) (int, string, []byte) {
		return http.StatusOK, textPlain, nil
	},
}
