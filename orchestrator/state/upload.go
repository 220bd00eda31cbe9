package state

import "fmt"

// AuthorizeUploader checks a delta upload's announcement
// (nodeauth.UploadDelta): its signature over msg, its timestamp within
// MaxSkew of now, and that the key is a registered compute node that is
// not banned. The sequence is not checked (the file carries its own, which
// the judge checks); the digest the announcement signs binds it to one
// file, so a replay within the skew can only upload that file again.
func (m *Machine) AuthorizeUploader(now int64, a Auth, msg []byte) error {
	if err := m.verifyFresh(now, a, msg); err != nil {
		return err
	}
	n := m.nodes[a.Node]
	switch {
	case n == nil:
		return fmt.Errorf("%w: %s is not registered (register before uploading deltas)", ErrNotFound, a.Node)
	case n.Role == RoleValidator:
		return fmt.Errorf("%w: %s registered as a validator, which submits verdicts, not deltas", ErrPermission, a.Node)
	case m.ledger.Banned(a.Node):
		return fmt.Errorf("%w: %s is banned", ErrPermission, a.Node)
	}
	return nil
}

// verifyFresh checks a read-only or self-authenticating request's
// signature over msg and its timestamp within MaxSkew of now.
func (m *Machine) verifyFresh(now int64, a Auth, msg []byte) error {
	pub, err := ParsePublicKey(a.Node)
	if err != nil {
		return err
	}
	if err := verifyNode(a.Node, pub, msg, a.Sig); err != nil {
		return err
	}
	if d := now - a.Timestamp; d > m.cfg.MaxSkew.Milliseconds() || -d > m.cfg.MaxSkew.Milliseconds() {
		return fmt.Errorf("%w: request time %d is %d ms from the orchestrator's %d (allowed %v; check the node's clock)", ErrStale, a.Timestamp, d, now, m.cfg.MaxSkew)
	}
	return nil
}
