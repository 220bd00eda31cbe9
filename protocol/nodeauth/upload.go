package nodeauth

import "crypto/ed25519"

// UploadDelta announces a delta upload (NodeService.UploadDelta): the job,
// the file's signature digest (hex) and size, and its compressed traces'
// size, for the hanzod named by Auth.Audience (as every request). Seq is
// not checked (the file carries its own sequence); Timestamp bounds the
// announcement's replay, and the digest binds it to one file, so a
// replayed announcement can only upload the same file again (a
// duplicate).
type UploadDelta struct {
	Auth
	Job         string
	Digest      string
	DeltaBytes  uint64
	TracesBytes uint64
}

// SignedBytes is what a node signs.
func (u UploadDelta) SignedBytes() []byte {
	e := header("uploaddelta", u.Auth)
	e.str(u.Job)
	e.str(u.Digest)
	e.u64(u.DeltaBytes)
	e.u64(u.TracesBytes)
	return e.Bytes()
}

// SignUpload signs u in place with the node's key (and sets Auth.Node).
func SignUpload(key ed25519.PrivateKey, u *UploadDelta) {
	u.Node = nodeID(key)
	u.Sign(key, u.SignedBytes())
}
