package cli

import (
	"strings"
	"testing"
)

func TestRedactURL_HidesPasswordsAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"url with password", "postgres://app:s3cret@db.example:5432/app?sslmode=require",
			"postgres://app:xxxxx@db.example:5432/app?sslmode=require"},
		{"postgresql scheme", "postgresql://app:s3cret@db/app", "postgresql://app:xxxxx@db/app"},
		{"url without password", "postgres://app@db:5432/app", "postgres://app@db:5432/app"},
		{"url without user", "postgres://db:5432/app", "postgres://db:5432/app"},
		{"escaped password", "postgres://app:p%40ss%2Fw0rd@db/app", "postgres://app:xxxxx@db/app"},
		{"password in query", "postgres://db/app?user=app&password=s3cret", "postgres://db/app?password=xxxxx&user=app"},
		{"sslpassword in query", "postgres://app@db/app?sslpassword=s3cret", "postgres://app@db/app?sslpassword=xxxxx"},
		{"unescaped # in password", "postgres://app:s3c#ret@db/app", "postgres://app:xxxxx@db/app"},
		{"unescaped ? in password", "postgres://app:s3c?ret@db/app", "postgres://app:xxxxx@db/app"},
		{"unescaped / in password", "postgres://app:12/34@db/app", "postgres://app:xxxxx@db/app"},
		{"unescaped @ in password", "postgres://app:s3c@ret@db/app", "postgres://app:xxxxx@db/app"},
		{"bad escape in password", "postgres://app:s3c%zzret@db/app", "postgres://app:xxxxx@db/app"},
		{"multiple hosts", "postgres://app:s3cret@db1:5432,db2:5432/app", "postgres://app:xxxxx@db1:5432,db2:5432/app"},
		{"dsn", "host=db user=app password=s3cret dbname=app", "host=db user=app password=xxxxx dbname=app"},
		{"dsn quoted", "host=db password='s3c ret\\' x' dbname=app", "host=db password=xxxxx dbname=app"},
		{"dsn spaces around =", "host=db password = s3cret dbname=app", "host=db password = xxxxx dbname=app"},
		{"dsn upper case key", "host=db PASSWORD=s3cret", "host=db PASSWORD=xxxxx"},
		{"dsn sslpassword", "host=db sslpassword=s3cret", "host=db sslpassword=xxxxx"},
		{"dsn without password", "host=db user=app dbname=app", "host=db user=app dbname=app"},
		{"broker address", "kafka-1:9092", "kafka-1:9092"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := RedactURL(tt.in)
			if got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, secret := range []string{"s3cret", "s3c", "ret", "12/34", "p%40ss"} {
				if strings.Contains(tt.in, secret) && strings.Contains(got, secret) && !strings.Contains(tt.want, secret) {
					t.Errorf("RedactURL(%q) = %q still contains %q", tt.in, got, secret)
				}
			}
		})
	}
}
