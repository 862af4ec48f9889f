package kubeclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// object is a Kubernetes object with metadata.
type object interface {
	runtime.Object
	metav1.Object
}

// Resource is a typed client of one namespaced resource. Its methods send
// exactly the requests client-go's generated clients send
// (k8s.io/client-go/gentype, which is not used: its package also holds
// client-go's fake clients, and with them k8s.io/client-go/testing,
// strategic merge patching, managed fields and OpenAPI models).
type Resource[T object] struct {
	resource  string
	client    rest.Interface
	namespace string
	newObject func() T
}

// ResourceWithList is a Resource that can also be listed.
type ResourceWithList[T object, L runtime.Object] struct {
	*Resource[T]
	newList func() L
}

// GetClient is the REST client underneath.
func (c *Resource[T]) GetClient() rest.Interface { return c.client }

// request starts a request for the resource in the namespace, preferring
// protobuf, as the clientset does for built-in kinds.
func (c *Resource[T]) request(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefaultIfPreferred(true).Namespace(c.namespace).Resource(c.resource)
}

// Get reads the object name.
func (c *Resource[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	result := c.newObject()
	err := c.request(c.client.Get()).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(result)
	return result, err
}

// Create writes a new object.
func (c *Resource[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	result := c.newObject()
	err := c.request(c.client.Post()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(result)
	return result, err
}

// Update replaces the object; with a resourceVersion in obj, only if it is
// still at that version.
func (c *Resource[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	result := c.newObject()
	err := c.request(c.client.Put()).Name(obj.GetName()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(result)
	return result, err
}

// Patch applies a patch of type pt to the object name or its subresource.
func (c *Resource[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	result := c.newObject()
	err := c.request(c.client.Patch(pt)).Name(name).SubResource(subresources...).
		VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(result)
	return result, err
}

// Watch opens a watch; opts.TimeoutSeconds also bounds the request.
func (c *Resource[T]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request(c.client.Get()).VersionedParams(&opts, parameterCodec).Timeout(seconds(opts.TimeoutSeconds)).Watch(ctx)
}

// List reads the objects opts selects.
func (l *ResourceWithList[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	list := l.newList()
	err := l.request(l.client.Get()).VersionedParams(&opts, parameterCodec).Timeout(seconds(opts.TimeoutSeconds)).Do(ctx).Into(list)
	return list, err
}

func seconds(s *int64) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s) * time.Second
}
