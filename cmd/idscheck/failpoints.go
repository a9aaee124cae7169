package main

import profintent "github.com/idscheck/idscheck/profiles/intent"

// bundledFailpoints are the reference server's named failpoints, each with
// the term that crashes the server there (it calls os.Exit).
func bundledFailpoints() map[string]string {
	return profintent.Failpoints()
}
