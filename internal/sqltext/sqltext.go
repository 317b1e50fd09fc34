// Package sqltext loads the SQL texts that a package embeds, with their
// placeholders filled in: the stores', the inbox's, the CDC relay's and
// the operations' queries.
package sqltext

import (
	"fmt"
	"io/fs"
	"path"
)

// Load reads, for each destination in files, the file it names from dir
// of fsys, and stores there the text rendered by render (as it is when
// render is nil). The error names the file that could not be read.
func Load(fsys fs.FS, dir string, render func(string) string, files map[*string]string) error {
	for dst, name := range files {
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return fmt.Errorf("read embedded %s: %w", path.Join(dir, name), err)
		}
		*dst = string(b)
		if render != nil {
			*dst = render(*dst)
		}
	}
	return nil
}
