// Package plot draws small line charts as PNG images with the standard
// library alone: axes, grid lines, tick labels and a legend in a built-in
// 3×5 pixel font. It exists so `gym train` can write its reward curve
// without a plotting dependency.
package plot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
)

// Series is one line of the chart.
type Series struct {
	Name  string
	X, Y  []float64
	Color color.RGBA
}

// Chart is a line chart with a fixed Y range.
type Chart struct {
	Title      string
	Width      int // pixels; 0 means 640
	Height     int // pixels; 0 means 400
	YMin, YMax float64
	Series     []Series
}

var (
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{225, 225, 225, 255}
)

// Palette holds distinguishable line colours.
var Palette = []color.RGBA{{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {255, 127, 14, 255}}

// Render draws the chart.
func (c Chart) Render() (*image.RGBA, error) {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 640
	}
	if h == 0 {
		h = 400
	}
	if w < 100 || h < 80 || !(c.YMax > c.YMin) {
		return nil, errors.New("plot: chart too small or empty Y range")
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("plot: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		for _, x := range s.X {
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
		}
	}
	if !(xmax > xmin) {
		xmin, xmax = 0, 1
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	const scale = 2
	left, right, top, bottom := 56, 16, 36, 40
	pw, ph := w-left-right, h-top-bottom
	px := func(x float64) int { return left + int(math.Round((x-xmin)/(xmax-xmin)*float64(pw))) }
	py := func(y float64) int { return top + ph - int(math.Round((y-c.YMin)/(c.YMax-c.YMin)*float64(ph))) }
	// Grid and Y ticks: five intervals.
	for i := 0; i <= 5; i++ {
		y := c.YMin + (c.YMax-c.YMin)*float64(i)/5
		yy := py(y)
		line(img, left, yy, left+pw, yy, grey)
		label := trimFloat(y)
		text(img, left-6-textWidth(label, scale), yy-5*scale/2, label, scale, black)
	}
	// X ticks: about six, on round numbers.
	step := niceStep((xmax - xmin) / 6)
	for x := math.Ceil(xmin/step) * step; x <= xmax+1e-9; x += step {
		xx := px(x)
		line(img, xx, top, xx, top+ph, grey)
		label := trimFloat(x)
		text(img, xx-textWidth(label, scale)/2, top+ph+6, label, scale, black)
	}
	line(img, left, top, left, top+ph, black)
	line(img, left, top+ph, left+pw, top+ph, black)
	text(img, left, 10, strings.ToUpper(c.Title), scale, black)
	lx := left + pw - 10
	for i := len(c.Series) - 1; i >= 0; i-- {
		s := c.Series[i]
		for j := 1; j < len(s.X); j++ {
			thick(img, px(s.X[j-1]), py(s.Y[j-1]), px(s.X[j]), py(s.Y[j]), s.Color)
		}
		name := strings.ToUpper(s.Name)
		lx -= textWidth(name, scale) + 28
		thick(img, lx, top+ph-14, lx+16, top+ph-14, s.Color)
		text(img, lx+20, top+ph-14-5, name, scale, s.Color)
	}
	return img, nil
}

// WritePNG renders the chart as PNG to w.
func (c Chart) WritePNG(w io.Writer) error {
	img, err := c.Render()
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	for _, d := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
		line(img, x0+d[0], y0+d[1], x1+d[0], y1+d[1], c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// font is a 3×5 bitmap font: each glyph is five rows of three bits.
var font = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2}, '-': {0, 0, 7, 0, 0},
	'%': {5, 1, 2, 4, 5}, '(': {1, 2, 2, 2, 1}, ')': {4, 2, 2, 2, 4}, ':': {0, 2, 0, 2, 0},
	'/': {1, 1, 2, 4, 4}, '=': {0, 7, 0, 7, 0}, ',': {0, 0, 0, 2, 4}, ' ': {},
	'A': {2, 5, 7, 5, 5}, 'B': {6, 5, 6, 5, 6}, 'C': {7, 4, 4, 4, 7}, 'D': {6, 5, 5, 5, 6},
	'E': {7, 4, 6, 4, 7}, 'F': {7, 4, 6, 4, 4}, 'G': {7, 4, 5, 5, 7}, 'H': {5, 5, 7, 5, 5},
	'I': {7, 2, 2, 2, 7}, 'J': {1, 1, 1, 5, 7}, 'K': {5, 5, 6, 5, 5}, 'L': {4, 4, 4, 4, 7},
	'M': {5, 7, 7, 5, 5}, 'N': {6, 5, 5, 5, 5}, 'O': {7, 5, 5, 5, 7}, 'P': {7, 5, 7, 4, 4},
	'Q': {7, 5, 5, 7, 1}, 'R': {6, 5, 6, 5, 5}, 'S': {7, 4, 7, 1, 7}, 'T': {7, 2, 2, 2, 2},
	'U': {5, 5, 5, 5, 7}, 'V': {5, 5, 5, 5, 2}, 'W': {5, 5, 7, 7, 5}, 'X': {5, 5, 2, 5, 5},
	'Y': {5, 5, 2, 2, 2}, 'Z': {7, 1, 2, 4, 7},
}

func textWidth(s string, scale int) int { return len([]rune(s)) * 4 * scale }

func text(img *image.RGBA, x, y int, s string, scale int, c color.RGBA) {
	for _, r := range s {
		g, ok := font[r]
		if !ok {
			g = [5]uint8{7, 7, 7, 7, 7}
		}
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row]&(4>>col) == 0 {
					continue
				}
				for dy := 0; dy < scale; dy++ {
					for dx := 0; dx < scale; dx++ {
						img.SetRGBA(x+col*scale+dx, y+row*scale+dy, c)
					}
				}
			}
		}
		x += 4 * scale
	}
}
