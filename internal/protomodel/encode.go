package protomodel

// encode appends the canonical encoding of s: every field that can matter
// to a future event or property, and nothing else. Clients are symmetric
// (only their lock values, ci*16+attempt, name them on the nodes), and so
// are repairers: both are sorted by their own encodings, and the nodes'
// lock values renamed to match, so that states that differ only by which
// client (or repairer) is which share one encoding.
func (s sys) encode(b []byte, sc *scratch) []byte {
	nc, nr := s.cfg.Clients, s.cfg.Repairers
	sc.buf = sc.buf[:0]
	for i := range s.Clients[:nc] {
		st := len(sc.buf)
		sc.buf = s.Clients[i].encode(sc.buf, s.cfg.Extends > 0)
		if s.cfg.Leaders > 0 {
			sc.buf = append(sc.buf, bit(s.leader(i)))
		}
		sc.cl[i] = sc.buf[st:]
		sc.co[i] = i
	}
	for i := range s.Reps[:nr] {
		st := len(sc.buf)
		sc.buf = s.Reps[i].encode(sc.buf, s.rules)
		sc.rp[i] = sc.buf[st:]
		sc.ro[i] = i
	}
	sortBy(sc.co[:nc], sc.cl[:nc])
	sortBy(sc.ro[:nr], sc.rp[:nr])
	var rename [MaxClients]uint8 // original client -> position
	for p, ci := range sc.co[:nc] {
		rename[ci] = uint8(p)
	}
	b = p16(b, int(s.Now))
	b = p16(b, int(s.Wipes))
	b = p16(b, int(s.Jumps))
	b = p16(b, int(s.RepairsStarted))
	b = append(b, s.Saves, s.Rollbacks)
	b = p16(b, int(s.MaxReturned))
	b = p16(b, int(s.NTokens))
	for _, t := range s.Tokens[:s.NTokens] {
		b = p16(b, int(t))
	}
	if s.cfg.Reprovisions > 0 {
		b = append(b, s.Provs, s.Gen)
		b = s.Prov.encode(b, s.rules)
	}
	upt := s.rules.usesUptime()
	for i := range s.Nodes {
		n := &s.Nodes[i]
		b = n.Keys.encode(b, &rename)
		b = append(b, n.Run, n.Epoch, byte(n.Skew), bit(n.HasSaved))
		if upt {
			b = p16(b, int(n.RestartAt))
		}
		if int(s.Rollbacks) < s.cfg.Rollbacks && n.HasSaved { // a snapshot no rollback can load is irrelevant
			b = n.Saved.encode(b, &rename)
		}
	}
	for _, ci := range sc.co[:nc] {
		b = append(b, sc.cl[ci]...)
	}
	for _, ri := range sc.ro[:nr] {
		b = append(b, sc.rp[ri]...)
	}
	return b
}

func (k *Keys) encode(b []byte, rename *[MaxClients]uint8) []byte {
	h := k.Holder
	if h != 0 {
		h = rename[h/16]*16 + h%16
	}
	b = append(b, byte(k.ID), byte(k.UUID), bit(k.Roster), k.RecRun, h)
	b = k.Stamp.encode(b)
	b = p16(b, int(k.G))
	b = p16(b, int(k.E))
	b = p16(b, int(k.H))
	return p16(b, int(k.Expiry))
}

func (st Stamp) encode(b []byte) []byte {
	b = append(b, bit(st.Set), st.Nonce, st.Run)
	return p16(b, int(st.T))
}

// scratch is encode's working space.
type scratch struct {
	buf    []byte
	cl, rp [MaxClients][]byte
	co, ro [MaxClients]int
}

// sortBy sorts the indices idx by the encodings enc[idx[i]] (insertion
// sort: at most three).
func sortBy(idx []int, enc [][]byte) {
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && string(enc[idx[j]]) < string(enc[idx[j-1]]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
}

func (c *Client) encode(b []byte, ext bool) []byte {
	b = append(b, c.Phase, c.Attempts)
	if c.Phase == Holding { // the validity's end, not the attempt's start, matters then
		b = p16(b, int(c.Until))
	} else {
		b = p16(b, int(c.Start))
	}
	best := c.Best // the token matters while held or while a commit carrying it is in flight
	if c.Phase != Round2 && c.Phase != Holding && c.Com[0] != MsgSent && c.Com[1] != MsgSent && c.Com[2] != MsgSent {
		best = 0
	}
	b = p16(b, int(best))
	b = p16(b, int(c.Floor))
	for j := 0; j < N; j++ {
		b = append(b, c.Acq[j], byte(c.AcqSt[j]), c.Com[j], bit(c.Rel[j]))
		b = p16(b, int(c.AcqCand[j]))
		b = p16(b, int(c.ComRep[j]))
	}
	if ext {
		b = c.Ext.encode(b)
	}
	return b
}

func (r *Repairer) encode(b []byte, ru *Rules) []byte {
	b = append(b, r.Phase, byte(r.Target), r.Read, r.Intact, byte(r.U))
	b = r.Seen.encode(b)
	b = r.Want.encode(b)
	b = p16(b, int(r.RoundStart))
	b = p16(b, int(r.Top))
	b = p16(b, int(r.G))
	b = p16(b, int(r.SeenAt))
	t := &r.Tgt
	b = append(b, byte(t.UUID), byte(t.ID), bit(t.Intact))
	b = t.Stamp.encode(b)
	b = p16(b, int(t.Now))
	b = p16(b, int(t.Uptime))
	return b
}

// p16 appends v in two bytes; the model's values are small, and one out
// of range would make two states share an encoding: it panics.
func p16(b []byte, v int) []byte {
	if v < -1<<15 || v >= 1<<15 {
		panic("protomodel: value out of the encoding's range")
	}
	return append(b, byte(v), byte(v>>8))
}

func bit(v bool) byte {
	if v {
		return 1
	}
	return 0
}
