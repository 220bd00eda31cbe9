package model

import (
	"fmt"
	"math"
)

// Cache holds the keys and values of the positions a batch of sequences has
// seen so far, so each generation step costs one position, not the whole
// prefix.
type Cache struct {
	B, Len int
	k, v   [][]float32 // per layer, [B, Ctx, Dim]
}

// NewCache returns an empty cache for B sequences.
func (md *Model) NewCache(B int) *Cache {
	c := md.W.Cfg
	ch := &Cache{B: B, k: make([][]float32, c.Layers), v: make([][]float32, c.Layers)}
	for l := range ch.k {
		ch.k[l] = make([]float32, B*c.Ctx*c.Dim)
		ch.v[l] = make([]float32, B*c.Ctx*c.Dim)
	}
	return ch
}

// Step feeds one token per sequence at position ch.Len, appends its keys and
// values to the cache and returns the logits for the next token, [B, Vocab].
// Feeding a prefix token by token gives the same logits as Forward over it.
func (md *Model) Step(ch *Cache, tokens []int) ([]float32, error) {
	c := md.W.Cfg
	B, D, H := ch.B, c.Dim, c.Heads
	if len(tokens) != B {
		return nil, fmt.Errorf("model: step with %d tokens for a cache of %d sequences", len(tokens), B)
	}
	if ch.Len >= c.Ctx {
		return nil, fmt.Errorf("model: context of %d positions is full", c.Ctx)
	}
	if err := md.check(tokens, B, 1); err != nil {
		return nil, err
	}
	t := ch.Len
	hd := D / H
	scale := float32(1 / math.Sqrt(float64(hd)))
	x := make([]float32, B*D)
	for b, tok := range tokens {
		copy(x[b*D:(b+1)*D], md.W.Tok[tok*D:(tok+1)*D])
		axpy(1, md.W.Pos[t*D:(t+1)*D], x[b*D:(b+1)*D])
	}
	var scratch linAct
	r := make([]float32, B)
	h := make([]float32, B*D)
	for l := 0; l < c.Layers; l++ {
		L := &md.W.Layers[l]
		rmsNorm(h, r, x, L.Norm1, B, D)
		q := md.linear(l, Q, h, B, &scratch)
		k := md.linear(l, K, h, B, &scratch)
		v := md.linear(l, V, h, B, &scratch)
		kc, vc := ch.k[l], ch.v[l]
		for b := 0; b < B; b++ {
			copy(kc[(b*c.Ctx+t)*D:(b*c.Ctx+t+1)*D], k[b*D:(b+1)*D])
			copy(vc[(b*c.Ctx+t)*D:(b*c.Ctx+t+1)*D], v[b*D:(b+1)*D])
		}
		att := make([]float32, B*D)
		parallelFor(md.Threads, B, B*H*(t+1)*hd*2, func(lo, hi int) {
			row := make([]float32, t+1)
			for b := lo; b < hi; b++ {
				for hh := 0; hh < H; hh++ {
					qi := q[b*D+hh*hd : b*D+(hh+1)*hd]
					for j := 0; j <= t; j++ {
						kj := (b*c.Ctx+j)*D + hh*hd
						row[j] = scale * dot(qi, kc[kj:kj+hd])
					}
					softmaxInPlace(row)
					oi := att[b*D+hh*hd : b*D+(hh+1)*hd]
					for j := 0; j <= t; j++ {
						vj := (b*c.Ctx+j)*D + hh*hd
						axpy(row[j], vc[vj:vj+hd], oi)
					}
				}
			}
		})
		o := md.linear(l, O, att, B, &scratch)
		add(x, o)
		rmsNorm(h, r, x, L.Norm2, B, D)
		f := md.linear(l, FC1, h, B, &scratch)
		geluForward(md.Threads, f, nil, f)
		add(x, md.linear(l, FC2, f, B, &scratch))
	}
	rmsNorm(h, r, x, md.W.NormF, B, D)
	logits := make([]float32, B*c.Vocab)
	matMulT(md.Threads, logits, h, md.W.Head, B, D, c.Vocab)
	ch.Len++
	return logits, nil
}
