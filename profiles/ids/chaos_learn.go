package ids

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	mrand "math/rand/v2"
)

// learnWindows learns, before the load, how long each command's dedupe
// window lasts on the harness's clock when the target's time scale is not
// known (IDSConfig.TimeScaleAssumed), from what the target answers: one
// logical command of each type that declares a window is driven to its
// terminal answer (recorded and judged like any other), then GET
// /commands/{command_id} answers its created_at and ttl_expires_at, both
// on the target's clock (docs/ids-binding.md, "Time scale"): the window is
// their difference. A type whose window the target does not show is left
// out of the run: no delivery of it rests on an assumed window. An error
// when none is left.
func (w *idsWorkload) learnWindows(ctx context.Context, rnd *mrand.Rand) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var kept, dropped []string
	types := w.types[:0:0]
	for _, t := range w.types {
		if t.Window == 0 {
			types = append(types, t) // no window: the key never expires
			continue
		}
		c := w.mintOf(t, rnd)
		w.drive(ctx, ctx, c, rnd)
		c.mu.Lock()
		id, done := c.origID, c.terminal
		c.mu.Unlock()
		var doc struct {
			Created string  `json:"created_at"`
			Expires *string `json:"ttl_expires_at"`
		}
		var window time.Duration
		if done && id != "" {
			if _, err := w.get(ctx, idsPathCommands+"/"+url.PathEscape(id)+"?tenant_id="+url.QueryEscape(c.tenant), &doc); err == nil && doc.Expires != nil {
				created, err1 := time.Parse(time.RFC3339Nano, doc.Created)
				expires, err2 := time.Parse(time.RFC3339Nano, *doc.Expires)
				if err1 == nil && err2 == nil && expires.After(created) {
					window = expires.Sub(created)
				}
			}
		}
		if window <= 0 {
			dropped = append(dropped, t.Name)
			continue
		}
		t.Window = window
		c.typ.Window = window
		types = append(types, t)
		kept = append(kept, t.Name+" "+window.String())
	}
	w.cfg.Logger.Info("chaos ids: dedupe windows learnt from the target's answers", "windows", strings.Join(kept, ", "), "left out", strings.Join(dropped, ", "))
	if len(types) == 0 {
		return errors.New("chaos ids: the target's time scale is not known, and GET /commands/{id} showed the dedupe window of no command (created_at, ttl_expires_at): give --time-scale")
	}
	w.types = types
	return nil
}
