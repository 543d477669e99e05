// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package re2size

import "sort"

// program is a compiled program before flattening.
type program struct {
	inst                   []inst
	start, startUnanchored int
}

// optimize is the no-op bypass of Prog::Optimize (re2/prog.cc): from start
// (not the unanchored prefix), every successor that is a chain of no-ops
// is replaced by the chain's target.
func (p *program) optimize() {
	seen := map[int]bool{}
	queue := []int{}
	add := func(id int) {
		if id != 0 && !seen[id] {
			seen[id] = true
			queue = append(queue, id)
		}
	}
	skip := func(j int) int {
		for j != 0 && p.inst[j].op == opNop {
			j = p.inst[j].out
		}
		return j
	}
	add(p.start)
	for i := 0; i < len(queue); i++ {
		in := &p.inst[queue[i]]
		in.out = skip(in.out)
		add(in.out)
		if in.op == opAlt {
			in.out1 = skip(in.out1)
			add(in.out1)
		}
	}
}

// roots is Flatten's root map: instruction ids in the order they were
// marked.
type roots struct {
	order []int
	is    map[int]bool
}

func (r *roots) mark(id int) {
	if !r.is[id] {
		r.is[id] = true
		r.order = append(r.order, id)
	}
}

// flatten counts the instructions Prog::Flatten emits: one list per root
// (the fail instruction, the two starts, the successor of every byte
// range, capture and empty-width instruction, and the dominator roots),
// each holding the leaves reachable from its root through Alts and no-ops,
// and a no-op for every other root reached.
func (p *program) flatten() int {
	r := &roots{is: map[int]bool{}}
	r.mark(0)
	r.mark(p.startUnanchored)
	r.mark(p.start)
	preds := p.markSuccessors(r)
	sorted := append([]int(nil), r.order...)
	sort.Ints(sorted)
	for i := len(sorted) - 1; i > 0; i-- {
		if id := sorted[i]; id != p.startUnanchored && id != p.start {
			p.markDominator(id, r, preds)
		}
	}
	n := 0
	for _, root := range r.order {
		n += p.listSize(root, r)
	}
	return n
}

// markSuccessors walks from the unanchored start, marking the successor of
// every leaf as a root and recording the Alt predecessors of every
// instruction.
func (p *program) markSuccessors(r *roots) map[int][]int {
	preds := map[int][]int{}
	seen := map[int]bool{}
	stack := []int{p.startUnanchored}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for !seen[id] {
			seen[id] = true
			in := p.inst[id]
			switch in.op {
			case opAlt:
				preds[in.out] = append(preds[in.out], id)
				preds[in.out1] = append(preds[in.out1], id)
				stack = append(stack, in.out1)
				id = in.out
				continue
			case opByteRange, opCapture, opEmptyWidth:
				r.mark(in.out)
				id = in.out
				continue
			case opNop:
				id = in.out
				continue
			}
		}
	}
	return preds
}

// epsilonClosure is the set reachable from root through Alts and no-ops,
// stopping at other roots and at leaves (both included).
func (p *program) epsilonClosure(root int, r *roots) map[int]bool {
	seen := map[int]bool{}
	stack := []int{root}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for !seen[id] {
			seen[id] = true
			if id != root && r.is[id] {
				break
			}
			in := p.inst[id]
			if in.op == opAlt {
				stack = append(stack, in.out1)
				id = in.out
			} else if in.op == opNop {
				id = in.out
			}
		}
	}
	return seen
}

// markDominator marks as a root every instruction reachable from root
// that has an Alt predecessor root does not reach.
func (p *program) markDominator(root int, r *roots, preds map[int][]int) {
	reach := p.epsilonClosure(root, r)
	ids := make([]int, 0, len(reach))
	for id := range reach {
		ids = append(ids, id)
	}
	sort.Ints(ids) // deterministic order of marking
	for _, id := range ids {
		for _, pred := range preds[id] {
			if !reach[pred] {
				r.mark(id)
			}
		}
	}
}

// listSize is the length of root's list (Prog::EmitList).
func (p *program) listSize(root int, r *roots) int {
	n := 0
	for id := range p.epsilonClosure(root, r) {
		switch {
		case id != root && r.is[id]:
			n++ // a no-op to the other root's list
		case p.inst[id].op != opAlt && p.inst[id].op != opNop:
			n++
		}
	}
	return n
}
