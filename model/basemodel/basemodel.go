// Package basemodel ships the built-in base model, the one `gym up` and the
// built-in trainer start from: a tiny LlamaForCausalLM stored as a Hugging
// Face model directory (config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json, generation_config.json) under builtin/ and embedded
// in the binary. transformers loads it (AutoModelForCausalLM and
// AutoTokenizer on the directory `gym base export DIR` writes) and computes
// the logits the Go engine computes.
//
// The weights are produced by sft.Run with Recipe (a deterministic
// supervised pre-training from scratch on a mixture of correct and
// typically-wrong task answers, so the base holds both behaviours and GSPO
// has something to select); model.safetensors records the recipe and its
// SHA3 in its metadata. The tokenizer is TokenizerJSON, generated from the
// task vocabulary. Regenerate the directory with `go generate ./model/basemodel`
// after changing Recipe or the tokenizer; a test fails while the embedded
// files and the code disagree.
//
// Recipe: 133,312 parameters (hidden 64, 2 layers, 4 heads and 4 KV heads,
// intermediate 256, 16 positions, vocabulary 15, untied head), tasks
// addition and sort, bug_frac 0.7, 1200 steps × 64 problems per task, AdamW
// lr 2e-3; recipe SHA3-256 157544f1…8bd87b7. The shipped base, greedy on
// the 500 held-out problems of each task: addition exact 0.304 (typical
// mistake where it differs from the answer: 0.939), sort exact 0.362
// (0.737) — the previous network had 0.310 (0.956) and 0.294 (0.867).
// Details, the run and the sizes of the files: docs/models.md ("The
// built-in base").
//
// Load is the previous built-in base (package model's 101k-parameter
// network, base.safetensors), kept until its callers move to Builtin.
package basemodel

//go:generate go run ./mkbase -out builtin

import (
	"bytes"
	"crypto/sha3"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/chat"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/sft"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

//go:embed builtin
var builtinFS embed.FS

// Files of a Hugging Face model directory this package reads or writes.
const (
	ConfigFile           = llama.ConfigFile
	WeightsFile          = llama.WeightsFile
	TokenizerFile        = "tokenizer.json"
	TokenizerConfigFile  = "tokenizer_config.json"
	GenerationConfigFile = "generation_config.json"
)

// BuiltinFiles are the files of the built-in directory, sorted.
var BuiltinFiles = []string{ConfigFile, GenerationConfigFile, WeightsFile, TokenizerFile, TokenizerConfigFile}

// BuiltinName is the built-in base's name.
const BuiltinName = "builtin"

// Metadata keys of the built-in model.safetensors.
const (
	MetaRecipe     = "gym.sft_recipe"
	MetaRecipeHash = "gym.sft_recipe_sha3"
)

// Recipe is the pre-training run that produced the built-in weights.
func Recipe() sft.Config {
	return sft.Config{
		Model: sft.Model{
			Vocab: task.VocabSize + 1, Hidden: 64, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 4,
			HeadDim: 16, MaxPositions: 16, NormEps: 1e-6, RopeTheta: 10000, EOS: EOSID,
		},
		InitStd:     0.02,
		Tasks:       []string{"addition", "sort"},
		BugFrac:     0.7,
		Steps:       1200,
		Batch:       64,
		LR:          2e-3,
		Warmup:      50,
		WeightDecay: 0.01,
		Seed:        0,
	}
}

// RecipeHash is the hex SHA3-256 of the recipe's JSON.
func RecipeHash(c sft.Config) string {
	b, _ := json.Marshal(c)
	h := sha3.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Tokenizer parses TokenizerJSON.
func Tokenizer() (*tokenizer.Tokenizer, error) {
	return tokenizer.Parse(TokenizerJSON())
}

// GenerationConfigJSON is the built-in generation_config.json.
func GenerationConfigJSON() []byte {
	return []byte(fmt.Sprintf("{\n  \"eos_token_id\": %d\n}\n", EOSID))
}

// Base is a base model: weights, tokenizer and the identity of the
// directory they came from.
type Base struct {
	Name string // "builtin", or the directory's base name
	// Weights are the parameters, decoded. For a base opened with
	// OpenConfig (ConfigOnly) only Weights.Cfg is set: no tensor was read.
	Weights   *llama.Weights
	Tokenizer *tokenizer.Tokenizer
	// SHA3 identifies the directory: DirSHA3 of its files (empty for a
	// ConfigOnly base, whose files are not read).
	SHA3 string
	// ConfigOnly marks a base opened with OpenConfig, for a backend that
	// loads the directory itself (torch): its config and tokenizer, no
	// weights. The Go engine refuses it (backend.GoBackend.Start).
	ConfigOnly bool
	// Chat is the directory's chat templates and special tokens (package
	// chat), nil when it has none or they could not be loaded (ChatErr
	// says why); the built-in base has none.
	Chat    *chat.Set
	ChatErr error
}

// RenderChat renders a conversation (a JSON list of messages) with the
// model's chat template and a generation prompt, as transformers'
// apply_chat_template(messages, add_generation_prompt=True,
// tokenize=False) does: the prompt of a dataset row that is a
// conversation. strftime_now is undefined, so the text is a pure function
// of the conversation (Llama 3.x's templates then date it 26 Jul 2024).
func (b *Base) RenderChat(messages string) (string, error) {
	if b.Chat == nil {
		err := b.ChatErr
		if err == nil {
			err = chat.ErrNoTemplate
		}
		return "", fmt.Errorf("basemodel: %s: %w", b.Name, err)
	}
	t, err := b.Chat.Select("", false)
	if err != nil {
		return "", err
	}
	return t.Render(json.RawMessage(messages), chat.Options{AddGenerationPrompt: true, Vars: b.Chat.Vars(nil)})
}

// loadChat reads dir's chat templates into b.
func (b *Base) loadChat(dir string) {
	b.Chat, b.ChatErr = chat.Load(dir)
}

// ErrConfigOnly reports a ConfigOnly base given to code that needs its
// weights.
var ErrConfigOnly = errors.New("basemodel: the base was opened without its weights (OpenConfig)")

// BuiltinFS returns the built-in directory as a file system (its files at
// the root).
func BuiltinFS() fs.FS {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		panic(err) // a constant path into the embedded tree
	}
	return sub
}

// Builtin parses the built-in base (each call parses anew; callers cache).
// It refuses an embedded directory made by another recipe or tokenizer
// than the code's.
func Builtin() (*Base, error) {
	fsys := BuiltinFS()
	ck, err := llama.OpenFS(fsys)
	if err != nil {
		return nil, fmt.Errorf("basemodel: built-in: %w", err)
	}
	defer ck.Close()
	if got, want := ck.Metadata()[MetaRecipeHash], RecipeHash(Recipe()); got != want {
		return nil, fmt.Errorf("basemodel: the embedded weights were made by recipe %.12s, the code has %.12s: run go generate ./basemodel", got, want)
	}
	w, err := ck.Read()
	if err != nil {
		return nil, fmt.Errorf("basemodel: built-in: %w", err)
	}
	tj, err := fs.ReadFile(fsys, TokenizerFile)
	if err != nil {
		return nil, fmt.Errorf("basemodel: built-in: %w", err)
	}
	if !bytes.Equal(tj, TokenizerJSON()) {
		return nil, fmt.Errorf("basemodel: the embedded tokenizer.json is not TokenizerJSON's: run go generate ./basemodel")
	}
	tok, err := tokenizer.Parse(tj)
	if err != nil {
		return nil, fmt.Errorf("basemodel: built-in: %w", err)
	}
	sum, err := DirSHA3(fsys)
	if err != nil {
		return nil, fmt.Errorf("basemodel: built-in: %w", err)
	}
	return &Base{Name: BuiltinName, Weights: w, Tokenizer: tok, SHA3: sum}, nil
}

// Open reads a Hugging Face model directory: its config.json and weights
// (llama.Load) and its tokenizer.json (tokenizer.Load). A missing file is
// an error naming it; so is a tokenizer with ids beyond the model's
// vocabulary.
func Open(dir string) (*Base, error) {
	for _, f := range []string{ConfigFile, TokenizerFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Errorf("basemodel: %s: no %s: %w", dir, f, err)
		}
	}
	w, err := llama.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("basemodel: %s: %w", dir, err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("basemodel: %s: %w", dir, err)
	}
	if n := tok.VocabSize(); n > w.Cfg.Vocab {
		return nil, fmt.Errorf("basemodel: %s: %s has ids up to %d, %s has vocab_size %d", dir, TokenizerFile, n-1, ConfigFile, w.Cfg.Vocab)
	}
	sum, err := DirSHA3(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("basemodel: %s: %w", dir, err)
	}
	abs, _ := filepath.Abs(dir)
	b := &Base{Name: filepath.Base(abs), Weights: w, Tokenizer: tok, SHA3: sum}
	b.loadChat(dir)
	return b, nil
}

// OpenConfig reads what a Go process needs of a Hugging Face model
// directory whose weights another process loads (the torch backend's
// Python process): config.json, checked against the safetensors headers
// (llama.Open: the architecture, every tensor's name, shape and dtype; no
// tensor data read), and tokenizer.json. The base's Weights hold only the
// config (ConfigOnly), so the Go process's memory does not grow with the
// model. Errors are Open's.
func OpenConfig(dir string) (*Base, error) {
	for _, f := range []string{ConfigFile, TokenizerFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Errorf("basemodel: %s: no %s: %w", dir, f, err)
		}
	}
	ck, err := llama.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("basemodel: %s: %w", dir, err)
	}
	cfg := ck.Cfg
	if err := ck.Close(); err != nil {
		return nil, fmt.Errorf("basemodel: %s: %w", dir, err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("basemodel: %s: %w", dir, err)
	}
	if n := tok.VocabSize(); n > cfg.Vocab {
		return nil, fmt.Errorf("basemodel: %s: %s has ids up to %d, %s has vocab_size %d", dir, TokenizerFile, n-1, ConfigFile, cfg.Vocab)
	}
	abs, _ := filepath.Abs(dir)
	b := &Base{Name: filepath.Base(abs), Weights: &llama.Weights{Cfg: cfg}, Tokenizer: tok, ConfigOnly: true}
	b.loadChat(dir)
	return b, nil
}

// DirSHA3 is the identity of a model directory: the hex SHA3-256 of, for
// each regular file at its top level whose name does not begin with "." in
// byte order of names (subdirectories are not included; symbolic links are
// followed),
//
//	uint64 big-endian length of the name ‖ name ‖ uint64 big-endian length of the contents ‖ contents.
func DirSHA3(fsys fs.FS) (string, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha3.New256()
	var n [8]byte
	for _, name := range names {
		st, err := fs.Stat(fsys, name)
		if err != nil {
			return "", err
		}
		if !st.Mode().IsRegular() {
			continue
		}
		f, err := fsys.Open(name)
		if err != nil {
			return "", err
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(name)))
		h.Write(n[:])
		h.Write([]byte(name))
		binary.BigEndian.PutUint64(n[:], uint64(st.Size()))
		h.Write(n[:])
		k, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
		if k != st.Size() {
			return "", fmt.Errorf("%s changed while being hashed", name)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ErrExists reports an export into a directory that already has files.
var ErrExists = errors.New("basemodel: directory is not empty")

// Export writes the built-in directory to dir byte for byte, creating dir;
// it refuses a dir that exists and is not empty.
func Export(dir string) error { return export(dir, false) }

// ExportOverwrite is Export into a directory that may hold files: the
// built-in files replace those of the same names; other files stay.
func ExportOverwrite(dir string) error { return export(dir, true) }

func export(dir string, overwrite bool) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 && !overwrite {
		return fmt.Errorf("%w: %s", ErrExists, dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("basemodel: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("basemodel: %w", err)
	}
	fsys := BuiltinFS()
	for _, f := range BuiltinFiles {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return fmt.Errorf("basemodel: built-in: %w", err)
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, f), 0o644, true, b); err != nil {
			return fmt.Errorf("basemodel: %w", err)
		}
	}
	return nil
}

// WriteDir writes a base model directory for weights w made by recipe rc
// with the built-in tokenizer: what mkbase writes, and what the embedded
// directory holds.
func WriteDir(dir string, w *llama.Weights, rc sft.Config) error {
	recipe, err := json.Marshal(rc)
	if err != nil {
		return err
	}
	st, err := llama.EncodeSafetensors(w, map[string]string{MetaRecipe: string(recipe), MetaRecipeHash: RecipeHash(rc)})
	if err != nil {
		return err
	}
	cj, err := w.Cfg.ConfigJSON()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		ConfigFile: cj, WeightsFile: st, TokenizerFile: TokenizerJSON(),
		TokenizerConfigFile: TokenizerConfigJSON(w.Cfg.MaxPositions), GenerationConfigFile: GenerationConfigJSON(),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range BuiltinFiles {
		if err := atomicfile.WriteBytes(filepath.Join(dir, f), 0o644, true, files[f]); err != nil {
			return err
		}
	}
	if len(files) != len(BuiltinFiles) || !slices.IsSorted(BuiltinFiles) {
		return fmt.Errorf("basemodel: BuiltinFiles out of date")
	}
	return nil
}
