package features

// rewrite edits one JSON answer of a bundled server on its way to the
// harness: path is the request's path, doc the decoded body (the tampering
// proxies of the tests that prove a check can fail).
type rewrite func(method, path string, doc map[string]any)
