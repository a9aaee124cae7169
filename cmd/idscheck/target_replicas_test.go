package main

import (
	"slices"
	"strings"
	"testing"
)

// TestTargetFileReplicas: "replicas" and "store" of the target file: the
// first replica is the target's URL, the others its Replicas, the store's
// password and each cmd's secrets among the secrets; a malformed list is
// an error saying what is wrong.
func TestTargetFileReplicas(t *testing.T) {
	file := writeFile(t, "target.json", `{
  "api_key": "k-1",
  "replicas": [{"url": "http://127.0.0.1:8081", "cmd": "TOKEN=cmd-secret-1 ./srv --addr 127.0.0.1:8081"}, {"url": "http://127.0.0.1:8082"}],
  "store": {"url": "postgres://app:store-pw-9@127.0.0.1:5432/app"}
}`)
	tf, err := parseTarget(t, []string{"--target-file", file}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if tf.URL != "http://127.0.0.1:8081" || len(tf.ReplicaList) != 2 || tf.Store != "postgres://app:store-pw-9@127.0.0.1:5432/app" {
		t.Fatalf("url %q, replicas %v, store %q", tf.URL, tf.ReplicaList, tf.Store)
	}
	if got := tf.Target().Replicas; !slices.Equal(got, []string{"http://127.0.0.1:8082"}) {
		t.Errorf("Target().Replicas = %v", got)
	}
	for _, s := range []string{"store-pw-9", "cmd-secret-1"} {
		if !slices.Contains(tf.Secrets(), s) {
			t.Errorf("%q is not among the secrets", s)
		}
	}
	bad := []struct{ body, want string }{
		{`{"replicas": {"url": "http://127.0.0.1:1"}}`, `"replicas": want a list`},
		{`{"replicas": []}`, `"replicas": an empty list`},
		{`{"replicas": ["http://127.0.0.1:1"]}`, `"replicas"[0]: want an object`},
		{`{"replicas": [{"cmd": "./srv"}]}`, `"replicas"[0]: no "url"`},
		{`{"replicas": [{"url": "ftp://x"}]}`, `"replicas"[0].url is "ftp://x"`},
		{`{"replicas": [{"url": "http://127.0.0.1:1", "command": "x"}]}`, `unknown field "replicas[0].command"`},
		{`{"replicas": [{"url": "http://127.0.0.1:1"}, {"url": "http://127.0.0.1:1"}]}`, `"replicas"[1].url is the url of "replicas"[0]`},
		{`{"url": "http://127.0.0.1:1", "replicas": [{"url": "http://127.0.0.1:2"}]}`, `"url" is the first replica`},
		{`{"target_cmd": "./srv", "replicas": [{"url": "http://127.0.0.1:2"}]}`, `give no "target_cmd" beside it`},
		{`{"store": "postgres://x"}`, `"store": want an object`},
		{`{"store": {"url": "mysql://u:hidden-pw@h/db"}}`, `or a postgres:// URL`},
		{`{"store": {"dsn": "x"}}`, `unknown field "store.dsn"`},
	}
	for _, b := range bad {
		_, err := parseTarget(t, []string{"--target-file", writeFile(t, "bad.json", b.body)}, nil, true)
		if err == nil || !strings.Contains(err.Error(), b.want) || strings.Contains(err.Error(), "hidden-pw") {
			t.Errorf("%s: error %v, want it to say %s (and no password)", b.body, err, b.want)
		}
	}
	_, err = parseTarget(t, []string{"--target-file", file, "--target", "http://127.0.0.1:9"}, nil, true)
	if err == nil || !strings.Contains(err.Error(), `lists the replicas in "replicas"`) {
		t.Errorf("--target beside replicas: %v", err)
	}
}
