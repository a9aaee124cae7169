package main

import sut "github.com/idscheck/idscheck/sut/intent"

// bundledFailpoints are the reference server's named failpoints, each with
// the term that crashes the server there (it calls os.Exit).
func bundledFailpoints() map[string]string {
	m := map[string]string{}
	for _, name := range sut.Failpoints() {
		m[name] = `return("exit")`
	}
	return m
}
