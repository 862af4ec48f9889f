package kubeclient

import (
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// kinds is the scheme the clients encode and decode with, and its codecs.
type kinds struct {
	scheme         *runtime.Scheme
	codecs         serializer.CodecFactory
	parameterCodec runtime.ParameterCodec
}

// theKinds is built when the first client is made (New), not when the
// program starts: a replica that never talks to an API server (the SQLite
// backend, sidecar probe) never registers the kinds nor builds the codecs.
var theKinds = sync.OnceValue(func() kinds {
	s := newScheme()
	return kinds{scheme: s, codecs: serializer.NewCodecFactory(s), parameterCodec: runtime.NewParameterCodec(s)}
})

// newScheme knows the kinds the sidecar reads and writes, and nothing
// else: Lease and LeaseList (a list is the fallback of a Lease watch), Pod
// and Event, with the meta types of every group version (options, Status,
// WatchEvent).
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	kinds := map[schema.GroupVersion][]runtime.Object{
		coordinationv1.SchemeGroupVersion: {&coordinationv1.Lease{}, &coordinationv1.LeaseList{}},
		corev1.SchemeGroupVersion:         {&corev1.Pod{}},
		eventsv1.SchemeGroupVersion:       {&eventsv1.Event{}},
	}
	for gv, objects := range kinds {
		s.AddKnownTypes(gv, objects...)
		metav1.AddToGroupVersion(s, gv)
	}
	return s
}
