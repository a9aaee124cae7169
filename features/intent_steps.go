package features

import "github.com/cucumber/godog"

// intentSteps registers the step definitions of features/intent.feature.
// Per-scenario state lives in a struct created by an sc.Before hook.
func intentSteps(sc *godog.ScenarioContext, env *Env) {
}
