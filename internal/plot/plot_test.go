package plot

import (
	"bytes"
	"image/png"
	"testing"
)

func TestRenderDrawsSeriesWhereExpected(t *testing.T) {
	c := Chart{Title: "reward", YMin: 0, YMax: 1, Width: 300, Height: 200,
		Series: []Series{{Name: "a", X: []float64{0, 10}, Y: []float64{0, 1}, Color: Palette[1]}}}
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// The diagonal passes through the centre of the plot area.
	left, right, top, bottom := 56, 16, 36, 40
	cx, cy := left+(300-left-right)/2, top+(200-top-bottom)/2
	found := false
	for dx := -2; dx <= 2 && !found; dx++ {
		for dy := -2; dy <= 2; dy++ {
			r, g, b, _ := img.At(cx+dx, cy+dy).RGBA()
			if r>>8 == 214 && g>>8 == 39 && b>>8 == 40 {
				found = true
				break
			}
		}
	}
	if !found {
		t.Fatal("series colour not found at the centre of the chart")
	}
	if _, err := (Chart{YMin: 1, YMax: 1}).Render(); err == nil {
		t.Fatal("empty Y range accepted")
	}
	if _, err := (Chart{YMax: 1, Series: []Series{{X: []float64{1}}}}).Render(); err == nil {
		t.Fatal("mismatched series accepted")
	}
}
