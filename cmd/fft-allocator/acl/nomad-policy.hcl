# Nomad ACL policy of the fft-allocator: exactly the calls it makes (README.md, "ACLs").
#   nomad acl policy apply -description "fft-allocator" fft-allocator nomad-policy.hcl
#   nomad acl token create -name fft-allocator -policy fft-allocator
#
# list-jobs:       GET /v1/jobs?namespace=* (observe, and the watcher's blocking query)
# read-job:        GET /v1/job/<id>, GET /v1/allocations?namespace=* (observe, watcher), and
#                  GET /v1/event/stream?topic=Job&topic=Evaluation&topic=Allocation&namespace=*
#                  (the leader's job cache and job list, and the evaluations that failed to
#                  place a started job; Nomad grants it only with read-job on namespace "*",
#                  so keep "*" here)
# submit-job:      PUT /v1/job/<id> with the observed JobModifyIndex (start, steer, park)
# alloc-lifecycle: PUT /v1/allocation/<id>/stop (park)
namespace "*" {
  capabilities = ["list-jobs", "read-job", "submit-job", "alloc-lifecycle"]
}

# GET /v1/nodes?resources=true and GET /v1/node/<id>: GPU capacity per model.
node {
  policy = "read"
}
