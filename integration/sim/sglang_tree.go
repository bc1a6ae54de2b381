package sim

import "container/heap"

// approxTree is the approximate radix tree of SGLang's cache-aware router (sgl-project/sglang,
// sgl-router/src/tree.rs; now sgl-model-gateway): one tree shared by all workers ("tenants"),
// each node remembering which tenants hold it and when each last touched it. It records what
// the router *sent* where, not what the workers cache, so it believes a prefix is cached until
// its own eviction removes it.
//
// SGLang's tree is over request text, one character per edge step; this one is over trace
// blocks, one block per edge, each weighing its prompt tokens (a full block 512, a prompt's
// partial last block what it holds). Sizes are in tokens. Mooncake block ids name a whole
// prefix, but the tree is keyed by path anyway, as a radix tree is.
//
// Semantics kept from tree.rs:
//   - insert attaches the tenant to every node on the prompt's path (creating missing ones),
//     adds each newly attached node's size to the tenant's total, and stamps the access time;
//   - prefixMatch walks as deep as the prompt matches any tenant's path and answers the first
//     tenant found at the deepest node (tree.rs takes the first key of the node's DashMap, an
//     unspecified but stable order; here a seeded permutation of the workers), then refreshes
//     that tenant's access times from the node to the root;
//   - smallestTenant is the tenant with the smallest total size;
//   - evict, per tenant above the limit, removes that tenant from its least recently used
//     leaves (nodes no child of which it holds) until its total is within the limit, and drops
//     nodes no tenant holds.
//
// Invariants: size[t] is the sum of weight over live nodes t holds; a tenant holding a node
// holds all its ancestors; every live non-root node is held by some tenant.
type approxTree struct {
	nodes []approxNode // nodes[0] is the root (holds no tokens)
	size  []int        // tenant → tokens held
	order []int        // tenant → rank in the tie-break order (lower first)
	free  []int32      // dead node slots for reuse
}

type approxNode struct {
	parent   int32
	key      uint64 // block id of the edge from the parent
	weight   int
	children map[uint64]int32
	access   []float64 // tenant → last access (ms), −1 when not held
	holders  int       // tenants holding the node
}

// newApproxTree returns a tree for tenants workers whose arbitrary-order ties follow order
// (a permutation of 0..tenants−1; nil for index order).
func newApproxTree(tenants int, order []int) *approxTree {
	t := &approxTree{size: make([]int, tenants), order: make([]int, tenants)}
	for i := range t.order {
		t.order[i] = i
	}
	for rank, w := range order {
		t.order[w] = rank
	}
	t.nodes = append(t.nodes, t.newNode(-1, 0, 0))
	return t
}

func (t *approxTree) newNode(parent int32, key uint64, weight int) approxNode {
	n := approxNode{parent: parent, key: key, weight: weight, access: make([]float64, len(t.size))}
	for i := range n.access {
		n.access[i] = -1
	}
	return n
}

// blockTokens is the token weight of block i of a prompt of input tokens.
func blockTokens(i, input int) int {
	return max(0, min(TraceBlockTokens, input-i*TraceBlockTokens))
}

// insert records blocks (a prompt of input tokens) as sent to tenant at time now.
func (t *approxTree) insert(blocks []uint64, input, tenant int, now float64) {
	cur := int32(0)
	t.nodes[0].access[tenant] = now
	for i, b := range blocks {
		n := &t.nodes[cur]
		next, ok := n.children[b]
		if !ok {
			next = t.alloc(cur, b, blockTokens(i, input))
			n = &t.nodes[cur] // alloc may move the slice
			if n.children == nil {
				n.children = make(map[uint64]int32)
			}
			n.children[b] = next
		}
		c := &t.nodes[next]
		if c.access[tenant] < 0 {
			c.holders++
			t.size[tenant] += c.weight
		}
		c.access[tenant] = now
		cur = next
	}
}

func (t *approxTree) alloc(parent int32, key uint64, weight int) int32 {
	if k := len(t.free); k > 0 {
		id := t.free[k-1]
		t.free = t.free[:k-1]
		t.nodes[id] = t.newNode(parent, key, weight)
		return id
	}
	t.nodes = append(t.nodes, t.newNode(parent, key, weight))
	return int32(len(t.nodes) - 1)
}

// prefixMatch returns how many leading blocks of blocks the tree holds for some tenant and the
// tenant it answers (−1 when nothing matched), refreshing that tenant's path at time now.
func (t *approxTree) prefixMatch(blocks []uint64, now float64) (matched, tenant int) {
	cur := int32(0)
	for _, b := range blocks {
		next, ok := t.nodes[cur].children[b]
		if !ok {
			break
		}
		cur = next
		matched++
	}
	if matched == 0 {
		return 0, -1
	}
	tenant = -1
	for w, at := range t.nodes[cur].access {
		if at >= 0 && (tenant < 0 || t.order[w] < t.order[tenant]) {
			tenant = w
		}
	}
	for n := cur; n >= 0; n = t.nodes[n].parent {
		t.nodes[n].access[tenant] = now
	}
	return matched, tenant
}

// smallestTenant returns the tenant holding the fewest tokens (ties by the tie-break order).
func (t *approxTree) smallestTenant() int {
	best := 0
	for w := 1; w < len(t.size); w++ {
		if t.size[w] < t.size[best] || (t.size[w] == t.size[best] && t.order[w] < t.order[best]) {
			best = w
		}
	}
	return best
}

// leafOf reports whether tenant holds node n and no child of it.
func (t *approxTree) leafOf(n int32, tenant int) bool {
	if n == 0 || t.nodes[n].access[tenant] < 0 {
		return false
	}
	for _, c := range t.nodes[n].children {
		if t.nodes[c].access[tenant] >= 0 {
			return false
		}
	}
	return true
}

// evict trims every tenant holding more than maxTokens to at most maxTokens, least recently
// used leaves first.
func (t *approxTree) evict(maxTokens int) {
	for tenant := range t.size {
		if t.size[tenant] <= maxTokens {
			continue
		}
		var h leafHeap
		for n := range t.nodes {
			if t.nodes[n].holders > 0 && t.leafOf(int32(n), tenant) {
				h = append(h, leafEntry{at: t.nodes[n].access[tenant], node: int32(n)})
			}
		}
		heap.Init(&h)
		for h.Len() > 0 && t.size[tenant] > maxTokens {
			e := heap.Pop(&h).(leafEntry)
			n := &t.nodes[e.node]
			n.access[tenant] = -1
			n.holders--
			t.size[tenant] -= n.weight
			parent := n.parent
			if n.holders == 0 && len(n.children) == 0 {
				t.drop(e.node)
			}
			if t.leafOf(parent, tenant) {
				heap.Push(&h, leafEntry{at: t.nodes[parent].access[tenant], node: parent})
			}
		}
	}
}

// drop unlinks the unheld childless node n from its parent and frees its slot.
func (t *approxTree) drop(n int32) {
	delete(t.nodes[t.nodes[n].parent].children, t.nodes[n].key)
	t.nodes[n] = approxNode{parent: -1}
	t.free = append(t.free, n)
}

type leafEntry struct {
	at   float64
	node int32
}

// leafHeap orders leaves by access time, oldest first (ties by node, for determinism).
type leafHeap []leafEntry

func (h leafHeap) Len() int { return len(h) }
func (h leafHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].node < h[j].node
}
func (h leafHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *leafHeap) Push(x any)   { *h = append(*h, x.(leafEntry)) }
func (h *leafHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
