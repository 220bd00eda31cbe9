package jobspec

import (
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// BuiltinModel is the model name of the base model embedded in the binary.
const BuiltinModel = "builtin"

// ErrModel reports a job's model field that names no base model a worker
// can fetch: it must be BuiltinModel or the CID of a base-model artifact.
var ErrModel = errors.New("jobspec: model must be builtin or the CID of a base-model artifact")

// ModelCID returns the root CID a job's model names, or ok false for the
// built-in base. The CID must be the canonical string of a CIDv1 over
// sha2-256 whose codec is dag-pb (a directory, as `gym artifact publish
// --kind base-model DIR` makes): the form every node compares, so one base
// has one name. A Hugging Face repository id, a path or any other string is
// refused with ErrModel (the Hub id and revision belong in the artifact's
// manifest, for people, never in the job).
func ModelCID(model string) (c cid.Cid, ok bool, err error) {
	if model == BuiltinModel {
		return cid.Undef, false, nil
	}
	if len(model) > Fields.Model.MaxLen {
		return cid.Undef, false, fmt.Errorf("%w: %d bytes", ErrModel, len(model))
	}
	c, err = cid.Decode(model)
	if err != nil {
		return cid.Undef, false, fmt.Errorf("%w: %q is not a CID (publish the model directory with gym artifact publish --kind base-model DIR and name the CID it prints)", ErrModel, model)
	}
	p := c.Prefix()
	switch {
	case p.Version != 1 || p.Codec != cid.DagProtobuf || p.MhType != mh.SHA2_256 || p.MhLength != 32:
		return cid.Undef, false, fmt.Errorf("%w: %s is not a CIDv1 of a directory over sha2-256", ErrModel, model)
	case c.String() != model:
		return cid.Undef, false, fmt.Errorf("%w: %q is not in canonical form (%s)", ErrModel, model, c)
	}
	return c, true, nil
}

// CheckModel reports whether model has the form ModelCID accepts.
func CheckModel(model string) error {
	_, _, err := ModelCID(model)
	return err
}
