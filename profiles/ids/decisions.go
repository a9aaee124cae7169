package ids

import "github.com/idscheck/idscheck/spec"

// Decision IDs of IDS that checks rest on (--reading ID=NAME).
const (
	DecisionReplayForm = "replay-form"
)

// Decisions lists the places where seed 001 leaves a choice open that a
// check needs an answer to.
func Decisions() []spec.Decision {
	return []spec.Decision{
		{
			ID:       DecisionReplayForm,
			Profile:  Name,
			Section:  "IX.A",
			Question: "Does a replay return the original outcome itself, or a reference to the original evidence chain?",
			Readings: []spec.Reading{
				{Name: "outcome", Section: "IX.A", Quote: "the same terminal outcome",
					Means: "a replay answers the original status and outcome document (same command_id, outcome_ref and result)"},
				{Name: "reference", Section: "IX.A", Quote: "a reference to the same terminal evidence chain",
					Means: "a replay answers a document whose outcome_ref and command_id are the original's; its result may be left out"},
			},
			Choice: "outcome: the bundled server replays the stored status and body byte for byte, which carries the original outcome_ref too, so it follows both readings.",
			Why:    "§IX.A allows either (\"It MUST return: the same terminal outcome, or a reference to the same terminal evidence chain\"); a target that follows one is not failed for it.",
		},
	}
}
