package recon

import (
	"testing"
)

// BenchmarkReconRound100k1pct runs one recon round between two in-process
// nodes of 100,000 digests that differ in 1% (500 each way) over loopback
// TCP, and reports the bytes exchanged.
func BenchmarkReconRound100k1pct(b *testing.B) {
	d, a, dOnly, aOnly := splitSets(1000, 99_000, 500, 500)
	dt, at := BuildTree(d), BuildTree(a)
	var bytes, requests int64
	for b.Loop() {
		pr := runPair(b, dt, at, SessionConfig{}, SessionConfig{})
		if pr.driveErr != nil || pr.answerErr != nil {
			b.Fatal(pr.driveErr, pr.answerErr)
		}
		if len(pr.drive.Missing) != len(aOnly) || len(pr.answer.Missing) != len(dOnly) {
			b.Fatal("did not converge")
		}
		bytes = pr.drive.BytesRead + pr.drive.BytesWritten
		requests = int64(pr.drive.Requests)
	}
	b.ReportMetric(float64(bytes), "bytes/round")
	b.ReportMetric(float64(requests), "requests/round")
}
