package engine

import "github.com/kvselect/kvselect/core/engine/kvhash"

// Hashing outside the lock. Hashing a long prompt costs ~10 ns per token (a 1M-token prompt:
// 10 ms) and converting explicit hashes ~1 ns each; done under the service's one lock, that
// time is added to every concurrent selection. The service therefore asks for the partition's
// hashing parameters under the lock (HashPlan, O(1)), hashes without the lock (Prehash, which
// reads only immutable engine state), and the engine uses the result when it normalises the
// prompt under the lock, provided the partition's parameters have not changed in between;
// otherwise it hashes again itself. Random tracking hashes (assume_kv_reuse=false) draw from the
// engine's random source and are always made under the lock.

// HashPlan is what hashing a prompt for one partition needs. The zero value (no such
// partition) makes Prehash a no-op.
type HashPlan struct {
	key       PartitionKey
	blockSize uint32
	eagle     bool
	ok        bool
}

// prehashed is a prompt hashed by Prehash (held in Prompt.pre; never decoded or encoded).
type prehashed struct {
	blockSize   uint32
	eagle       bool
	assumeReuse bool
	tokenPath   bool
	block, seq  []uint64
}

// HashPlan returns partition key's hashing parameters (call under the owner's lock).
func (e *Engine) HashPlan(key PartitionKey) HashPlan {
	p := e.parts[key]
	if p == nil {
		return HashPlan{}
	}
	return HashPlan{key: key, blockSize: p.blockSize, eagle: p.isEagle, ok: true}
}

// Prehash hashes pr for plan and keeps the result in pr for the next engine call that
// normalises it. It reads only the engine's immutable configuration and keyed scheme, so it
// may run concurrently with other engine calls; it never fails (the engine validates later).
func (e *Engine) Prehash(plan HashPlan, pr *Prompt, override *ConfigOverride) {
	pr.pre = nil
	if !plan.ok || plan.blockSize == 0 || CheckPromptSize(e.lim, pr) != nil {
		return
	}
	assumeReuse := e.cfg.AssumeKVReuse
	if override != nil && override.AssumeKVReuse != nil {
		assumeReuse = *override.AssumeKVReuse
	}
	tokens, mmInfos := promptTokens(pr)
	if len(tokens) == 0 {
		if pr.SequenceHashes == nil || (pr.BlockHashes != nil && len(pr.BlockHashes) != len(pr.SequenceHashes)) {
			return
		}
		ph := &prehashed{blockSize: plan.blockSize, eagle: plan.eagle, assumeReuse: assumeReuse, seq: toU64(pr.SequenceHashes)}
		if pr.BlockHashes != nil {
			ph.block = toU64(pr.BlockHashes)
		}
		pr.pre = ph
		return
	}
	if e.lim.checkBlocks(len(tokens), plan.blockSize) != nil {
		return
	}
	lora, salt := deref(pr.LoraName, ""), deref(pr.CacheSalt, "")
	eagle := deref(pr.IsEagle, plan.eagle)
	bs := int(plan.blockSize)
	mm := mmHashes(mmInfos)
	ph := &prehashed{blockSize: plan.blockSize, eagle: plan.eagle, assumeReuse: assumeReuse, tokenPath: true}
	ph.block = kvhash.BlockHashes(nil, tokens, bs, kvhash.BlockSeed(lora, salt), eagle, mm)
	switch {
	case !assumeReuse:
		// random tracking hashes: drawn under the lock
	case e.keyed != nil:
		blockSeed, chainSeed := e.keyed.Seeds(plan.key.Model, plan.key.Group, plan.blockSize, salt, lora, eagle)
		tracked := kvhash.BlockHashes(nil, tokens, bs, blockSeed, eagle, mm)
		ph.seq = kvhash.SequenceHashes(tracked[:0:0], tracked, chainSeed)
	default:
		ph.seq = kvhash.SequenceHashes(nil, ph.block, kvhash.Seed)
	}
	pr.pre = ph
}

// takePre returns and clears pr's prehashed form when it was made for p and assumeReuse.
func takePre(pr *Prompt, p *partition, assumeReuse bool) *prehashed {
	ph := pr.pre
	pr.pre = nil
	if ph == nil || ph.blockSize != p.blockSize || ph.eagle != p.isEagle || ph.assumeReuse != assumeReuse {
		return nil
	}
	return ph
}

// promptTokens returns the tokens a prompt hashes and their multimodal infos.
func promptTokens(pr *Prompt) ([]uint32, []*BlockExtraInfo) {
	tokens, mmInfos := pr.TokenIDs, pr.BlockMMInfos
	if mi := pr.MMRoutingInfo; mi != nil && len(mi.RoutingTokenIDs) > 0 {
		tokens = mi.RoutingTokenIDs
		if mi.BlockMMInfos != nil {
			mmInfos = mi.BlockMMInfos
		}
	}
	return tokens, mmInfos
}

// mmHashes returns the per-block multimodal hash function of mmInfos (nil when none).
func mmHashes(mmInfos []*BlockExtraInfo) func(int) []uint64 {
	if len(mmInfos) == 0 {
		return nil
	}
	return func(i int) []uint64 {
		if i >= len(mmInfos) || mmInfos[i] == nil || len(mmInfos[i].MMObjects) == 0 {
			return nil
		}
		hs := make([]uint64, len(mmInfos[i].MMObjects))
		for j, o := range mmInfos[i].MMObjects {
			hs[j] = o.MMHash
		}
		return hs
	}
}
