package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/tablet"
)

// errorCode is the Kafka error code of an engine error.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, tablet.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, tablet.ErrNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, tablet.ErrRecordBatchTooLarge):
		return kerr.MessageTooLarge.Code
	}
	if code, ok := codesByName[tablet.ErrorName(err)]; ok {
		return code
	}
	return kerr.UnknownServerError.Code
}

// codesByName maps Kafka's error names to their codes.
var codesByName = func() map[string]int16 {
	m := map[string]int16{}
	for code := int16(-1); code < 150; code++ {
		if e := kerr.ErrorForCode(code); e != nil {
			var ke *kerr.Error
			if errors.As(e, &ke) {
				m[ke.Message] = code
			}
		}
	}
	return m
}()
