package features

import "github.com/cucumber/messages/go/v21"

// Pickles parses a feature file (name is its URI) into its scenarios,
// outlines expanded (ParseFeature).
func Pickles(name string, src []byte) ([]*messages.Pickle, error) {
	return ParseFeature(src, name)
}
