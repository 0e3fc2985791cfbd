package e2e

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The operator console in headless Chromium (docs/operations.md#operator-console), against a
// gateway and sandbox whose unknown outcomes come from real timed-out calls. With the variable
// CONSOLE_SCREENSHOTS set to a directory, the test also writes the console's screenshots there
// (make screenshots: docs/img).

// consoleMarkupKey and consoleMarkupTitle are a key and a stored body made of markup: the console
// must show each as text. Were either parsed as HTML, window.pwned would be set. (A tenant cannot
// hold markup: the gateway takes only an RFC 9110 token.)
const (
	consoleMarkupKey   = `<img src=x onerror="window.pwned=1">`
	consoleMarkupTitle = `<b>bold</b><script>window.pwned=2</script>`
)

func TestConsole(t *testing.T) {
	t.Parallel()
	const token = "console-test-token"
	e := newEnv(t, embeddedStore, envOptions{env: []string{"IDEMGATEWAY_ADMIN_TOKEN=" + token}})
	e.gw.AdminToken = token

	// Three calls time out at the gateway (upstream timeout 300 ms): their records are
	// outcome_unknown. They start one after another, so their queue order is theirs.
	timeOut := func(key, tenant string) {
		r := e.gw.do(t, Request{Path: pathSlow, Key: key, Body: ticketBody,
			Header: map[string]string{"X-Sandbox-Delay": "2s", "X-Tenant-ID": tenant}})
		expectProblem(t, r, http.StatusGatewayTimeout, "upstream-timeout", "execute", false)
	}
	timeOut("console-oldest", "default")
	timeOut(consoleMarkupKey, "acme")
	timeOut("console-raced", "default")
	// A committed call whose stored answer holds markup (the sandbox echoes the title).
	expectCreated(t, e.gw.do(t, Request{Key: "console-body",
		Body: `{"title":"` + consoleMarkupTitle + `","priority":"high","customer_id":"c-42"}`}))

	b := StartBrowser(t)
	home := e.gw.Admin + "/ui/"
	recordURL := func(tenant, tool, key string) string {
		return home + "#/record?" + url.Values{"tenant": {tenant}, "tool": {tool}, "key": {key}}.Encode()
	}

	// The page asks for the token; a wrong one is refused and asked for again.
	b.Do(t, "open the console", chromedp.Navigate(home), chromedp.WaitVisible(chromedp.ID("token")))
	if got := Eval[string](t, b, `document.querySelector('label[for=token]').textContent`); got != "Admin token" {
		t.Errorf("the token input's label is %q, want \"Admin token\"", got)
	}
	b.Do(t, "send a wrong token", chromedp.SendKeys(chromedp.ID("token"), "wrong-token"+kb.Enter))
	b.Until(t, "the prompt to come back, saying the token was refused",
		`!document.getElementById('login').hidden && document.getElementById('login-error').textContent.includes('refused')`)
	b.Do(t, "send the token", chromedp.SendKeys(chromedp.ID("token"), token+kb.Enter))

	// The queue: the three unknown outcomes, oldest first, the markup shown as text.
	b.Until(t, "the queue's three rows", `document.querySelectorAll('#queue tbody tr').length === 3`)
	keys := Eval[[]string](t, b, `Array.from(document.querySelectorAll('#queue tbody tr td:first-child')).map(td => td.textContent)`)
	if want := []string{"console-oldest", consoleMarkupKey, "console-raced"}; strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Errorf("the queue's keys are %q, want %q (oldest first)", keys, want)
	}
	tenants := Eval[[]string](t, b, `Array.from(document.querySelectorAll('#queue tbody tr td:nth-child(2)')).map(td => td.textContent)`)
	if len(tenants) != 3 || tenants[1] != "acme" {
		t.Errorf("the queue's tenants are %q, want acme in the second row", tenants)
	}
	expectNoMarkup(t, b)
	// The chart counts this process's decisions: four executions.
	b.Until(t, "the chart's legend to count 4 executions", `document.getElementById('chart-legend').textContent.includes('execute: 4')`)
	if n := Eval[int](t, b, `document.querySelectorAll('#chart-plot rect').length`); n == 0 {
		t.Error("the decisions chart has no bars")
	}
	screenshot(t, b, "console-queue.png")

	// A record's page, reached from the queue; resolving it as committed with a remote id.
	b.Do(t, "open the oldest record", chromedp.Click(chromedp.CSS(`#queue tbody tr:first-child a`)), chromedp.WaitVisible(chromedp.ID("resolve")))
	if state := Eval[string](t, b, `document.getElementById('record-fields').textContent`); !strings.Contains(state, "outcome unknown") {
		t.Errorf("the record's fields %q do not say outcome unknown", state)
	}
	for id, name := range map[string]string{"committed": "Committed", "not-committed": "Not committed"} {
		if got := Eval[string](t, b, `document.getElementById('`+id+`').textContent`); got != name {
			t.Errorf("button #%s is named %q, want %q", id, got, name)
		}
	}
	if got := Eval[string](t, b, `document.querySelector('label[for=remote-id]').textContent`); got != "Remote id" {
		t.Errorf("the remote id input's label is %q, want \"Remote id\"", got)
	}
	b.Until(t, "the request's fields, to look the effect up by", `document.getElementById('request').textContent.includes('Disk full on db-1')`)
	// A confirmation is withdrawn when the form changes: it never sends what the form no longer shows.
	b.Do(t, "ask to resolve as committed, then change the remote id", chromedp.Click(chromedp.ID("committed")),
		chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.SendKeys(chromedp.ID("remote-id"), "T-4242"), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	b.Do(t, "ask again", chromedp.Click(chromedp.ID("committed")), chromedp.WaitVisible(chromedp.ID("confirm")))
	screenshot(t, b, "console-record.png")
	// Nothing is sent at the first click.
	if rec := e.gw.mustRecord(t, "create_ticket_slow", "console-oldest"); rec.State != "outcome_unknown" {
		t.Fatalf("after the first click the record is %s, want outcome_unknown still: the page resolved without a confirmation", rec.State)
	}
	b.Do(t, "confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	b.Until(t, "the page to say it resolved the record", `document.getElementById('notice').textContent.includes('Resolved as committed')`)
	rec := e.gw.mustRecord(t, "create_ticket_slow", "console-oldest")
	if rec.State != "committed" || rec.RemoteID != "T-4242" || rec.ResponseStatus != http.StatusOK {
		t.Errorf("resolved record: state %q, remote_id %q, response_status %d; want committed, T-4242, 200", rec.State, rec.RemoteID, rec.ResponseStatus)
	}
	// The next retry of that key replays the resolved receipt, without calling the upstream.
	before := e.sb.Stats(t)
	r := e.gw.do(t, Request{Path: pathSlow, Key: "console-oldest", Body: ticketBody})
	if r.Status != http.StatusOK || r.Decision() != "replay" || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry after the console's resolve: %d, decision %q, Idempotent-Replayed %q; want 200, a replay", r.Status, r.Decision(), r.Header.Get("Idempotent-Replayed"))
	}
	expectAttempts(t, e.sb, before.Requests.ByEndpoint[TicketsEndpoint])

	// Resolved meanwhile elsewhere: the page's POST gets 409 and the page says so. This one is
	// worked with the keyboard alone.
	b.Do(t, "open the raced record", chromedp.Navigate(recordURL("default", "create_ticket_slow", "console-raced")), chromedp.WaitVisible(chromedp.ID("resolve")))
	if status, body := e.gw.adminDo(t, http.MethodPost, recordPath("default", "create_ticket_slow", "console-raced")+"/resolve", `{"outcome":"committed","remote_id":"T-elsewhere"}`); status != http.StatusOK {
		t.Fatalf("resolving elsewhere: %d %s", status, body)
	}
	b.Do(t, "Tab to Not committed, Enter, Enter",
		chromedp.Focus(chromedp.ID("response-status")), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab))
	if id := Eval[string](t, b, `document.activeElement.id`); id != "not-committed" {
		t.Fatalf("two Tabs after the status input focus #%s, want #not-committed", id)
	}
	b.Do(t, "press Enter", chromedp.KeyEvent(kb.Enter))
	b.Until(t, "the confirmation, focused", `!document.getElementById('confirm').hidden && document.activeElement.id === 'confirm-yes'`)
	b.Do(t, "press Enter", chromedp.KeyEvent(kb.Enter))
	b.Until(t, "the page to say the record was resolved elsewhere", `document.getElementById('notice').textContent.includes('resolved meanwhile elsewhere')`)
	b.Until(t, "the record shown as it is now", `document.getElementById('record-fields').textContent.includes('committed: retries replay')`)
	if rec := e.gw.mustRecord(t, "create_ticket_slow", "console-raced"); rec.State != "committed" || rec.RemoteID != "T-elsewhere" {
		t.Errorf("the raced record: state %q, remote_id %q; want the other resolve's: committed, T-elsewhere", rec.State, rec.RemoteID)
	}

	// The stored body of a committed record, shown as text.
	b.Do(t, "open the committed record", chromedp.Navigate(recordURL("default", "create_ticket", "console-body")), chromedp.WaitVisible(chromedp.ID("body")))
	if body := Eval[string](t, b, `document.getElementById('body').textContent`); !strings.Contains(body, consoleMarkupTitle) {
		t.Errorf("the stored body shown is %q, want it to hold %q as text", body, consoleMarkupTitle)
	}
	expectNoMarkup(t, b)

	// The markup record's page; resolved as not committed, its key is free.
	b.Do(t, "open the markup record", chromedp.Navigate(recordURL("acme", "create_ticket_slow", consoleMarkupKey)), chromedp.WaitVisible(chromedp.ID("resolve")))
	if got := Eval[string](t, b, `document.getElementById('record-key').textContent`); got != consoleMarkupKey {
		t.Errorf("the record's key is shown as %q, want %q", got, consoleMarkupKey)
	}
	expectNoMarkup(t, b)
	b.Do(t, "resolve as not committed", chromedp.Click(chromedp.ID("not-committed")), chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.Click(chromedp.ID("confirm-yes")))
	b.Until(t, "the page to say the key is free", `document.getElementById('notice').textContent.includes('Resolved as not committed')`)
	b.Until(t, "the record page to say no record holds the key", `document.getElementById('record-gone').textContent.includes('No record holds this key')`)
	expectCreated(t, e.gw.do(t, Request{Path: pathSlow, Key: consoleMarkupKey, Body: ticketBody, Header: map[string]string{"X-Tenant-ID": "acme"}}))

	// 360 px wide: nothing wider than the screen.
	b.Do(t, "a 360 px screen", chromedp.EmulateViewport(360, 740), chromedp.Navigate(home))
	b.Until(t, "the queue, empty now", `document.getElementById('queue-summary').textContent === 'No unknown outcomes.'`)
	// The key "..", which a URL's path cannot carry (clients remove dot segments).
	timeOut("..", "default")
	b.Do(t, "refresh", chromedp.Click(chromedp.ID("refresh")))
	b.Until(t, "the queue's row", `document.querySelectorAll('#queue tbody tr').length === 1`)
	expectFits(t, b, "the queue")
	screenshot(t, b, "console-narrow.png")
	b.Do(t, "open the record", chromedp.Click(chromedp.CSS(`#queue tbody tr:first-child a`)), chromedp.WaitVisible(chromedp.ID("resolve")))
	if got := Eval[string](t, b, `document.getElementById('record-key').textContent`); got != ".." {
		t.Errorf("the record of key .. shows key %q", got)
	}
	expectFits(t, b, "a record's page")

	// Everything the page loaded came from the admin listener.
	for _, u := range b.Requests() {
		if !strings.HasPrefix(u, e.gw.Admin+"/") {
			t.Errorf("the console requested %s, not from the admin listener %s", u, e.gw.Admin)
		}
	}
}

// expectNoMarkup checks that no value of a record became markup: no element a key, tenant or
// body could have made, and none of their handlers ran.
func expectNoMarkup(t *testing.T, b *Browser) {
	t.Helper()
	if n := Eval[int](t, b, `document.querySelectorAll('main img, main b, main script').length`); n != 0 {
		t.Errorf("the page holds %d img, b or script elements: a record's value was parsed as markup", n)
	}
	if pwned := Eval[bool](t, b, `window.pwned !== undefined`); pwned {
		t.Error("a record's markup ran a script (window.pwned is set)")
	}
}

// expectFits checks that the page is no wider than the screen.
func expectFits(t *testing.T, b *Browser, what string) {
	t.Helper()
	if w := Eval[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		t.Errorf("%s is %d px wide on a %d px screen", what, w[0], w[1])
	}
}

// screenshot writes the tab's screenshot as name into $CONSOLE_SCREENSHOTS, when it is set.
func screenshot(t *testing.T, b *Browser, name string) {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
