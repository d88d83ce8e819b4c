package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"manypy.dev/manypy"
)

// The JSON of POST /predict.
//
//	{"inputs": [{"shape": [4, 64], "data": [0.1, ...]}],
//	 "kwargs": {"steps": 5, "normalize": false},
//	 "method": ""}
//
// Each input is a float32 tensor; kwargs are JSON scalars (integers stay
// integers). The answer: {"outputs": ..., "request_id": "..."}, where each
// tensor of the result is {"dtype", "shape", "data"} and dicts, lists and
// scalars keep their JSON shape.
type predictRequest struct {
	Inputs []tensorJSON   `json:"inputs"`
	Kwargs map[string]any `json:"kwargs"`
	Method string         `json:"method"`
	args   []any          // the inputs as *manypy.Tensor
	kwargs *manypy.Dict
}

type tensorJSON struct {
	DType string    `json:"dtype,omitempty"`
	Shape []int64   `json:"shape"`
	Data  []float64 `json:"data"`
}

type predictResponse struct {
	Outputs   any    `json:"outputs"`
	RequestID string `json:"request_id,omitempty"`
}

type errorBody struct {
	Error     string `json:"error"`
	RequestID string `json:"request_id,omitempty"`
	// Refused: the request was refused before any of it ran (the service
	// was starting or stopping, or its queue was full), so a client may
	// send it to another replica.
	Refused bool `json:"refused,omitempty"`
}

// maxBody bounds a request: bad input gets a 400, not the memory.
const maxBody = 64 << 20

func decodeRequest(body io.Reader) (*predictRequest, error) {
	raw, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxBody {
		return nil, fmt.Errorf("request larger than %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // so that "steps": 5 reaches Python as an int
	dec.DisallowUnknownFields()
	req := &predictRequest{}
	if err := dec.Decode(req); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if len(req.Inputs) == 0 && req.Method == "" {
		return nil, fmt.Errorf("no inputs") // a method may take only kwargs
	}
	for i, in := range req.Inputs {
		data := make([]float32, len(in.Data))
		for j, v := range in.Data {
			data[j] = float32(v)
		}
		t, err := manypy.NewTensor(data, in.Shape...)
		if err != nil {
			req.close()
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		req.args = append(req.args, t)
	}
	req.kwargs = manypy.NewDict()
	for k, v := range req.Kwargs {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		switch v.(type) {
		case nil, bool, int64, float64, string:
		default:
			req.close()
			return nil, fmt.Errorf("kwarg %q: only JSON scalars are accepted", k)
		}
		req.kwargs.Set(k, v)
	}
	return req, nil
}

func (r *predictRequest) close() {
	for _, a := range r.args {
		a.(*manypy.Tensor).Close()
	}
}

// encodeResult turns a call's result into JSON-ready values, closing its
// tensors once copied.
func encodeResult(v any) (any, error) {
	switch x := v.(type) {
	case *manypy.Tensor:
		defer x.Close()
		return tensorToJSON(x)
	case *manypy.Dict:
		out := make(map[string]any, x.Len())
		var firstErr error
		for i := 0; i < x.Len(); i++ {
			k, item := x.At(i)
			enc, err := encodeResult(item)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out[k] = enc
		}
		return out, firstErr
	case []any:
		return encodeItems(x)
	case manypy.Tuple:
		return encodeItems(x)
	case []byte:
		return x, nil // base64, as encoding/json writes []byte
	default:
		return x, nil
	}
}

func encodeItems(items []any) (any, error) {
	out := make([]any, len(items))
	var firstErr error
	for i, item := range items {
		enc, err := encodeResult(item)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out[i] = enc
	}
	return out, firstErr
}

func tensorToJSON(t *manypy.Tensor) (tensorJSON, error) {
	out := tensorJSON{DType: t.DType().String(), Shape: t.Shape(), Data: make([]float64, 0, t.NumElements())}
	switch t.DType() {
	case manypy.Float32:
		data, err := manypy.TensorCopy[float32](t)
		if err != nil {
			return out, err
		}
		for _, v := range data {
			out.Data = append(out.Data, float64(v))
		}
	case manypy.Float64:
		data, err := manypy.TensorCopy[float64](t)
		if err != nil {
			return out, err
		}
		out.Data = data
	case manypy.Int64:
		data, err := manypy.TensorCopy[int64](t)
		if err != nil {
			return out, err
		}
		for _, v := range data {
			out.Data = append(out.Data, float64(v))
		}
	default:
		return out, fmt.Errorf("a %s result tensor: this sample answers float32, float64 and int64", t.DType())
	}
	return out, nil
}
