package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/seglog/seglog"
)

// S3Options are what an s3:// URL does not carry. Credentials given here
// take the place of the standard AWS chain (environment, shared files,
// instance roles); they are never logged or printed.
type S3Options struct {
	AccessKey, SecretKey, SessionToken string
	// OpTimeout bounds each request, retries included. The default is 2
	// minutes.
	OpTimeout time.Duration
	// MaxAttempts is how many times a request is tried when it fails with
	// a retriable error (throttling, 5xx, a broken connection); other
	// errors are not retried. The default is 4.
	MaxAttempts int
	// HTTPClient is the client to use; the default is the SDK's.
	HTTPClient *http.Client
	// InstanceMetadata lets the AWS credential chain ask the EC2
	// instance-metadata endpoint for a role's credentials even when the
	// store is not AWS itself (it always may for AWS). The default is
	// false.
	InstanceMetadata bool
}

// checkS3URL checks an s3:// URL's shape: a bucket, known parameters.
func checkS3URL(u *url.URL) error {
	if u.Host == "" {
		return fmt.Errorf("%w: %q names no bucket", ErrBadStoreURL, RedactURL(u.String()))
	}
	q := u.Query()
	if v := q.Get("path-style"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%w: path-style=%q is not a boolean", ErrBadStoreURL, v)
		}
	}
	for k := range q {
		if k != "region" && k != "endpoint" && k != "path-style" {
			return fmt.Errorf("%w: unknown parameter %q (endpoint, region, path-style)", ErrBadStoreURL, k)
		}
	}
	if e := q.Get("endpoint"); e != "" {
		if eu, err := url.Parse(e); err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return fmt.Errorf("%w: endpoint=%q is not an http(s) URL", ErrBadStoreURL, RedactURL(e))
		}
	}
	return nil
}

// awsEndpoint reports whether a store's endpoint is AWS itself: none given
// (the SDK's own), or a host under amazonaws.com.
func awsEndpoint(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "amazonaws.com" || strings.HasSuffix(h, ".amazonaws.com")
}

// S3Store keeps objects in an S3 bucket under a prefix, through the AWS SDK
// for Go v2: any S3-compatible endpoint.
type S3Store struct {
	client *s3.Client
	bucket string
	prefix string
	desc   string
	opTO   time.Duration
}

var _ ObjectStore = (*S3Store)(nil)

// OpenS3Store opens s3://bucket/prefix?endpoint=URL&region=R&path-style=true.
func OpenS3Store(ctx context.Context, u *url.URL, o *S3Options) (*S3Store, error) {
	var opts S3Options
	if o != nil {
		opts = *o
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = 2 * time.Minute
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 4
	}
	if err := checkS3URL(u); err != nil {
		return nil, err
	}
	q := u.Query()
	region := q.Get("region")
	if region == "" {
		region = "us-east-1"
	}
	pathStyle, _ := strconv.ParseBool(q.Get("path-style"))
	loads := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(r *retry.StandardOptions) { r.MaxAttempts = opts.MaxAttempts })
		}),
	}
	if opts.AccessKey != "" {
		loads = append(loads, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKey, opts.SecretKey, opts.SessionToken)))
	}
	if opts.HTTPClient != nil {
		loads = append(loads, config.WithHTTPClient(opts.HTTPClient))
	}
	endpoint := q.Get("endpoint")
	if !opts.InstanceMetadata && !awsEndpoint(endpoint) {
		// The EC2 instance-metadata endpoint is not loopback, and a store
		// that is not AWS has no instance role: it is never asked unless
		// the user says so.
		loads = append(loads, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("tiering: loading the AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = pathStyle
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
		// Checksums are set by hand on every put and checked here.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	desc := "s3://" + u.Host + u.Path
	if endpoint != "" {
		desc += " at " + RedactURL(endpoint)
	}
	return &S3Store{client: client, bucket: u.Host, prefix: strings.Trim(u.Path, "/"), desc: desc, opTO: opts.OpTimeout}, nil
}

func (s *S3Store) String() string { return s.desc }

// Prefix is the URL's path: tiering puts it in its keys.
func (s *S3Store) Prefix() string { return s.prefix }

func (s *S3Store) key(k string) *string { return aws.String(k) }

func (s *S3Store) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opTO)
}

// s3err maps S3's answers to the package's errors.
func s3err(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchUpload":
			return fmt.Errorf("%w: %s %s: %v", ErrNotFound, op, key, err)
		case "PreconditionFailed", "ConditionalRequestConflict":
			return fmt.Errorf("%w: %s %s: %v", ErrExists, op, key, err)
		case "BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch", "InvalidChecksum":
			return fmt.Errorf("%w: %s %s: %v", ErrChecksum, op, key, err)
		}
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return fmt.Errorf("%w: %s %s: %v", ErrNotFound, op, key, err)
	}
	if strings.Contains(err.Error(), "get credentials") {
		return fmt.Errorf("%w: %s %s: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --access-key-id with --secret-access-key-file", ErrNoCredentials, op, key)
	}
	return &s3Error{op: op, key: key, err: err}
}

// ErrNoCredentials: the AWS credential chain found no credentials for an
// s3:// store.
var ErrNoCredentials = seglog.NewKafkaError("tiering: no S3 credentials", 56)

// s3Error is an S3 request's failure, worded without the SDK's "https"
// (the endpoint may be plain http).
type s3Error struct {
	op, key string
	err     error
}

func (e *s3Error) Error() string {
	return fmt.Sprintf("tiering: %s %s: %s", e.op, e.key, strings.ReplaceAll(e.err.Error(), "https response error", "response error"))
}

func (e *s3Error) Unwrap() error { return e.err }

func (s *S3Store) Put(ctx context.Context, key string, body []byte) (ObjectInfo, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: s.key(key), Body: bytes.NewReader(body),
		ContentLength:     aws.Int64(int64(len(body))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
		ChecksumCRC32C:    aws.String(crcBase64(crc32Of(body))),
		IfNoneMatch:       aws.String("*"),
	})
	if err != nil {
		return ObjectInfo{}, s3err("put", key, err)
	}
	info := ObjectInfo{Key: key, Size: int64(len(body)), Checksum: aws.ToString(out.ChecksumCRC32C)}
	if out.Size != nil {
		info.Size = *out.Size
	}
	return info, nil
}

func (s *S3Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: s.key(key), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	})
	if err != nil {
		return "", s3err("create multipart", key, err)
	}
	return aws.ToString(out.UploadId), nil
}

func (s *S3Store) UploadPart(ctx context.Context, key, id string, n int32, body []byte) (PartInfo, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	sum := crcBase64(crc32Of(body))
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &s.bucket, Key: s.key(key), UploadId: &id, PartNumber: aws.Int32(n),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: &sum,
	})
	if err != nil {
		return PartInfo{}, s3err(fmt.Sprintf("upload part %d of", n), key, err)
	}
	return PartInfo{Number: n, ETag: aws.ToString(out.ETag), Checksum: aws.ToString(out.ChecksumCRC32C)}, nil
}

func (s *S3Store) CompleteMultipart(ctx context.Context, key, id string, parts []PartInfo) (ObjectInfo, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	done := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		done[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag), ChecksumCRC32C: aws.String(p.Checksum)}
	}
	_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: s.key(key), UploadId: &id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
		IfNoneMatch:     aws.String("*"),
	})
	if err != nil {
		return ObjectInfo{}, s3err("complete multipart", key, err)
	}
	return s.Head(ctx, key)
}

func (s *S3Store) AbortMultipart(ctx context.Context, key, id string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: s.key(key), UploadId: &id})
	return s3err("abort multipart", key, err)
}

func (s *S3Store) ListMultipart(ctx context.Context, prefix string) ([]MultipartUpload, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []MultipartUpload
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: s.key(prefix)}
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, s3err("list multipart", prefix, err)
		}
		for _, u := range page.Uploads {
			out = append(out, MultipartUpload{Key: aws.ToString(u.Key), UploadID: aws.ToString(u.UploadId), Started: aws.ToTime(u.Initiated)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

func (s *S3Store) GetRange(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("tiering: range [%d, +%d) of %s", off, n, key)
	}
	if n == 0 {
		return nil, nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &s.bucket, Key: s.key(key), Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(n)-1)),
	})
	if err != nil {
		return nil, s3err("get", key, err)
	}
	defer out.Body.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(out.Body, b); err != nil {
		return nil, fmt.Errorf("tiering: reading [%d, %d) of %s: %w", off, off+int64(n), key, err)
	}
	return b, nil
}

func (s *S3Store) Head(ctx context.Context, key string) (ObjectInfo, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: s.key(key), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return ObjectInfo{}, s3err("head", key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), Checksum: aws.ToString(out.ChecksumCRC32C), Modified: aws.ToTime(out.LastModified)}, nil
}

func (s *S3Store) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: s.key(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s3err("list", prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

func (s *S3Store) Delete(ctx context.Context, key string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.key(key)})
	if err = s3err("delete", key, err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
