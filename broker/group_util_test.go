package broker

import "errors"

func errors_Is(err, target error) bool { return errors.Is(err, target) }
