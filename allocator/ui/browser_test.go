package ui

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// browserShot is the page's screenshot size.
const shotWidth, shotHeight = 1280, 1100

// TestPageInBrowser renders the page in headless Chromium (Debian's chromium) and checks the
// screenshot shows both plots' lines, drawn in their colours. The screenshot is kept in
// $FFT_SCREENSHOT_DIR (else the test's temporary folder). Without chromium the test skips,
// unless FFT_REQUIRE_BROWSER=1.
func TestPageInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("FFT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("FFT_REQUIRE_BROWSER=1 and no chromium: apt-get install chromium")
		}
		t.Skip("no chromium (apt-get install chromium)")
	}
	h := NewHistory(0)
	var last *loop.RoundRecord
	for r := range 40 {
		busy := min(6, 2+r/5)
		last = record(r, min(2, busy), busy-min(2, busy),
			loop.JobAudit{ID: "default/bert-large", Model: "A100", GPUs: 2, RhoAfter: float64(r%7) / 4},
			loop.JobAudit{ID: "default/resnet50", GPUs: 4, RhoAfter: float64(r) / 10, Reason: "GPUs are better used by jobs with lower cost"})
		h.ObserveRound(last, nil)
	}
	st := live.Status{Leading: true, Last: last, Jobs: map[string]loop.JobRecord{}}
	for id, s := range map[string]string{"default/bert-large": loop.StatusRunning, "default/resnet50": loop.StatusWaiting} {
		var r loop.JobRecord
		r.Status, r.Rho, r.User = s, 3.9, "ana"
		st.Jobs[id] = r
	}
	srv := httptest.NewServer(Handler(staticStatus(st), h))
	defer srv.Close()

	dir := os.Getenv("FFT_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "status-page.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), fmt.Sprintf("--window-size=%d,%d", shotWidth, shotHeight), "--screenshot="+shot, srv.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != shotWidth || b.Dy() != shotHeight {
		t.Errorf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), shotWidth, shotHeight)
	}
	for _, c := range []struct {
		what string
		rgb  color.RGBA
	}{{"utilisation line (#2b7bb9)", color.RGBA{0x2b, 0x7b, 0xb9, 0xff}}, {"rho max line (#c0392b)", color.RGBA{0xc0, 0x39, 0x2b, 0xff}}} {
		if n := pixels(img, c.rgb); n < 200 {
			t.Errorf("%s: %d pixels of its colour in the screenshot, want a drawn line (>= 200)", c.what, n)
		}
	}
	t.Logf("screenshot: %s", shot)
}

// pixels counts the pixels of img within a small distance of want (antialiasing aside).
func pixels(img image.Image, want color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r>>8, want.R) && near(g>>8, want.G) && near(bl>>8, want.B) {
				n++
			}
		}
	}
	return n
}

func near(got uint32, want uint8) bool {
	d := int(got) - int(want)
	return d >= -12 && d <= 12
}
