package broker

import "github.com/seglog/seglog"

// errorCode is the Kafka error code of an engine or coordinator error:
// the code its sentinel carries (seglog.KafkaCode), UNKNOWN_SERVER_ERROR
// for one that carries none.
func errorCode(err error) int16 { return seglog.KafkaCode(err) }
