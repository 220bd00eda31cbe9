package server

import (
	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/hardware"
)

// hardwareFrom is a registration's hardware report.
func hardwareFrom(acc []*pb.Accelerator, backends, dtypes []string) hardware.Report {
	r := hardware.Report{Backends: backends, DTypes: dtypes}
	for _, a := range acc {
		r.Accelerators = append(r.Accelerators, hardware.Accelerator{Name: a.GetName(), TotalMiB: a.GetTotalMib(), FreeMiB: a.GetFreeMib(), Compute: a.GetCompute()})
	}
	return r
}

func acceleratorsTo(acc []hardware.Accelerator) []*pb.Accelerator {
	var out []*pb.Accelerator
	for _, a := range acc {
		out = append(out, &pb.Accelerator{Name: a.Name, TotalMib: a.TotalMiB, FreeMib: a.FreeMiB, Compute: a.Compute})
	}
	return out
}

func eligibilityTo(f state.NodeFit) *pb.Eligibility {
	e := &pb.Eligibility{Node: f.Node, Eligible: f.Why == "", Reason: f.Why, Device: f.Fit.Device.Name, AvailableMib: f.Fit.Device.Available()}
	if e.Eligible {
		e.Reason = f.Fit.String()
		if f.Busy != "" {
			e.Reason += "; busy in " + f.Busy
		}
	}
	if f.Fit.Need != nil {
		e.NeedMib = f.Fit.Need.TotalMiB()
	}
	return e
}

// maxEligibility bounds the nodes a job's status lists one by one (its
// pending reason counts them all).
const maxEligibility = 256

// explain adds to a Pending job's status why it waits and, node by node
// (the first maxEligibility in id order), whether each can take it.
func explain(m *state.Machine, j *state.Job, out *pb.Job, now int64) {
	if j.State != state.Pending {
		return
	}
	out.PendingReason = m.PendingReason(j, now)
	for i, f := range m.Eligibility(j, now) {
		if i == maxEligibility {
			break
		}
		out.Eligibility = append(out.Eligibility, eligibilityTo(f))
	}
}
