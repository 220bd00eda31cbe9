// Package jobspec is the one home of a training job's description: what a
// submitter asks for and the typed slot that names each delta's place in
// the job.
package jobspec
