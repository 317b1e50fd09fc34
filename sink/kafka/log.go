package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Logger returns a franz-go logger (kgo.WithLogger) that passes franz-go's
// warnings and errors to l, each message prefixed "kafka: ". The relay's
// sink and the consumer runner log through it.
func Logger(l *slog.Logger) kgo.Logger { return slogLogger{l} }

// slogLogger passes franz-go's warnings and errors to a *slog.Logger.
type slogLogger struct{ l *slog.Logger }

var _ kgo.Logger = slogLogger{}

// Level is warn: franz-go's info level logs every connection and request.
func (slogLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (s slogLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	}
	s.l.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}
