# Consul ACL policy of an fft-allocator operator: what fftctl needs to park, pin and resume
# jobs (cmd/fft-allocator/README.md, "Operator overrides") and to read the ledger and the
# audit log (fftctl status, explain, audit). Replace nomad-fft/v2/ with -consul-prefix if you
# changed it.
#   consul acl policy create -name fft-operator -rules @consul-operator-policy.hcl
#   consul acl token create -description "fft operator" -policy-name fft-operator
key_prefix "nomad-fft/v2/" {
  policy = "read"
}

key_prefix "nomad-fft/v2/overrides/" {
  policy = "write"
}
