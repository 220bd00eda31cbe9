package task

// Export re-expresses t as a dataset's rows: its first test held-out
// problems (the set NewSplit(t, test) holds out, which a job on the
// built-in task evaluates on when its eval_size is test) and train training
// problems drawn from seed, none of them held out. Trained with the partial
// verifier (t's own reward, reward.PartialCredit) and the test split held
// out, a job on these rows learns what a job on t does.
func Export(t Task, train, test int, seed uint64) (trainRows, testRows []Problem) {
	s := NewSplit(t, test)
	return s.Batch(seed, 0, 0, train), s.Eval
}
