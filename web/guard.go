package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Guard serves h only to requests for its own page: a browser's Host must name the
// address the server listens on (listen, as bound: host:port), and a request that a
// page sent (Origin, or Sec-Fetch-Site) must come from that same page. Anything else
// gets 403, so that another site open in the user's browser can neither drive the
// view (cross-site POSTs) nor read it (DNS rebinding: a name of the attacker's
// resolving to 127.0.0.1 arrives with that name as Host).
//
// Host is accepted when its port is the listen port and its name is the listen
// address, a loopback name for a loopback listen (localhost, 127.0.0.1, [::1]), or,
// for a wildcard listen (0.0.0.0, ::), any IP literal or this machine's name: names
// that an attacker's DNS does not control.
func Guard(listen string, h http.Handler) http.Handler {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = listen, "80"
	}
	ip := net.ParseIP(host)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, host, port, ip) {
			http.Error(w, "forbidden: the Host "+r.Host+" is not this server's address ("+listen+")", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host || u.Scheme != "http" {
				http.Error(w, "forbidden: a page of "+o+" may not use this view", http.StatusForbidden)
				return
			}
		} else if o == "null" || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "forbidden: a cross-site request", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func hostAllowed(reqHost, host, port string, ip net.IP) bool {
	name, p, err := net.SplitHostPort(reqHost)
	if err != nil {
		name, p = reqHost, "80"
	}
	name = strings.Trim(strings.ToLower(name), "[]")
	if p != port {
		return false
	}
	if strings.EqualFold(name, strings.Trim(host, "[]")) {
		return true
	}
	switch {
	case ip != nil && ip.IsLoopback():
		return name == "localhost" || net.ParseIP(name).IsLoopback()
	case host == "" || ip != nil && ip.IsUnspecified():
		if net.ParseIP(name) != nil || name == "localhost" {
			return true
		}
		me, err := os.Hostname()
		return err == nil && strings.EqualFold(name, me)
	}
	return false
}

// newToken draws the token that state-changing requests must carry.
func newToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails on Linux (getrandom)
	return hex.EncodeToString(b[:])
}

// tokenOK says whether r carries token, as ?token= or the X-Rocelab-Token header.
func tokenOK(r *http.Request, token string) bool {
	got := r.Header.Get("X-Rocelab-Token")
	if got == "" {
		got = r.URL.Query().Get("token")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
