// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package core

import "github.com/infermesh/infermesh/pilot/pkg/model"

// routeList is one listener's routes as the Translator last translated
// them: a state per route (T) and, aligned with it, the routes themselves.
// The dense copy of the route pointers is what a change is found in: a
// controller update gives a new route slice whose elements are the last
// ones but for the routes that changed, and comparing 10,000 pointers in a
// row costs a few microseconds, where visiting each route's state cost a
// tenth of a millisecond per diff.
type routeList[T any] struct {
	states []T
	routes []*model.Route
}

// diff brings l to cur, a listener's current routes, strictly sorted by
// routeCmp as model.Listener.Routes are: keep makes the state of a route
// that did not change (sameRoute) but is a new pointer, change the state
// of one that did (o nil: added), and drop is told of one that is gone. A
// route that is the same pointer keeps its state, with no call. It returns
// false when cur is not strictly sorted (a hand-built model); some
// callbacks may have run, and the caller then translates from scratch and
// drops its state.
//
// The routes before the first and after the last pointer that differs
// are kept without a look at their states. When every route is where it
// was (the same kind, namespace and name at each index, the common case of
// routes edited in place), only the indices whose pointer differs are
// visited, in place.
func (l *routeList[T]) diff(cur []*model.Route,
	keep func(o T, r *model.Route) T, change func(o *T, r *model.Route) T, drop func(o T),
) bool {
	old := l.routes
	n, m := len(old), len(cur)
	p := 0
	for p < n && p < m && old[p] == cur[p] {
		p++
	}
	s := 0
	for s < n-p && s < m-p && old[n-1-s] == cur[m-1-s] {
		s++
	}
	if n == m {
		if l.diffInPlace(cur, p, n-s, keep, change) {
			return true
		}
	}
	states := make([]T, 0, m)
	routes := make([]*model.Route, 0, m)
	states = append(states, l.states[:p]...)
	routes = append(routes, old[:p]...)
	i := p
	prevKept := p > 0
	for j := p; j < m-s; j++ {
		r := cur[j]
		if i < n-s && old[i] == r {
			if j > 0 && !prevKept && routeCmp(cur[j-1], r) >= 0 {
				return false
			}
			states, routes = append(states, l.states[i]), append(routes, r)
			i++
			prevKept = true
			continue
		}
		if j > 0 && routeCmp(cur[j-1], r) >= 0 {
			return false
		}
		prevKept = false
		for i < n-s && routeCmp(old[i], r) < 0 {
			drop(l.states[i])
			i++
		}
		switch {
		case i < n-s && routeCmp(old[i], r) == 0:
			if sameRoute(old[i], r) {
				states = append(states, keep(l.states[i], r))
			} else {
				states = append(states, change(&l.states[i], r))
			}
			i++
		default:
			states = append(states, change(nil, r))
		}
		routes = append(routes, r)
	}
	for ; i < n-s; i++ {
		drop(l.states[i])
	}
	if s > 0 && m-s > 0 && !prevKept && routeCmp(cur[m-s-1], cur[m-s]) >= 0 {
		return false
	}
	l.states = append(states, l.states[n-s:]...)
	l.routes = append(routes, old[n-s:]...)
	return true
}

// diffInPlace is diff when cur has the last length: if every route in
// [from, to) whose pointer differs has the identity (routeCmp) of the one
// it replaces, it updates those in place and returns true; else it
// changes nothing and returns false.
func (l *routeList[T]) diffInPlace(cur []*model.Route, from, to int,
	keep func(o T, r *model.Route) T, change func(o *T, r *model.Route) T,
) bool {
	old := l.routes[:to]
	cur = cur[:to]
	var at []int
	for j := from; j < to; j++ {
		if old[j] != cur[j] {
			if routeCmp(old[j], cur[j]) != 0 {
				return false
			}
			at = append(at, j)
		}
	}
	for _, j := range at {
		if sameRoute(old[j], cur[j]) {
			l.states[j] = keep(l.states[j], cur[j])
		} else {
			l.states[j] = change(&l.states[j], cur[j])
		}
		old[j] = cur[j]
	}
	return true
}
