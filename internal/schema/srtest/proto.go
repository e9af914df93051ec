package srtest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/jhump/protoreflect/v2/protoprint"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Protobuf schemas may be registered as .proto text or, as some
// serializers send them (confluent-kafka-python before 2.0), as a
// base64-encoded FileDescriptorProto. The real registry accepts both and
// stores and serves the schema as .proto text (its canonical string;
// GET /schemas/ids/{id} returns text unless asked for ?format=serialized),
// so this registry converts a descriptor to text on registration and
// look-up, printed by jhump/protoreflect's protoprint.

// protoFromDescriptor returns the .proto text of text when text is a
// base64 FileDescriptorProto, and ok=false when it is not one (it is then
// taken as .proto text, as the registry does). Imports are resolved
// against the descriptors registered before (files) and the well-known
// types; an import neither knows is left a placeholder, which prints the
// same.
func protoFromDescriptor(text string, files *protoregistry.Files) (out string, ok bool, err error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return "", false, nil
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(raw, fdp); err != nil || fdp.GetName() == "" {
		return "", false, nil
	}
	fd, err := protodesc.FileOptions{AllowUnresolvable: true}.New(fdp, resolver{files})
	if err != nil {
		return "", true, fmt.Errorf("descriptor %q: %w", fdp.GetName(), err)
	}
	var sb strings.Builder
	if err := (&protoprint.Printer{}).PrintProtoFile(fd, &sb); err != nil {
		return "", true, fmt.Errorf("print descriptor %q: %w", fdp.GetName(), err)
	}
	if _, err := files.FindFileByPath(fd.Path()); errors.Is(err, protoregistry.NotFound) {
		_ = files.RegisterFile(fd) // a clash only loses resolution for later imports
	}
	return sb.String(), true, nil
}

// resolver looks in the registered descriptors, then the well-known types.
type resolver struct{ files *protoregistry.Files }

func (r resolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.files.FindFileByPath(path); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

func (r resolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.files.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}
