# Consul ACL policy of the fft-allocator: exactly the keys and sessions it uses (README.md,
# "ACLs"). Replace nomad-fft/v1/ with -consul-prefix if you changed it.
#   consul acl policy create -name fft-allocator -rules @consul-policy.hcl
#   consul acl token create -description fft-allocator -policy-name fft-allocator
#
# Under the prefix: ledger (CAS), jobs/ and rounds/ (transactions), leader (the lock),
# progress/ (read each round; written by PUT /v1/progress). No other token should write the
# prefix: a task with write access to progress/ could report for any job.
key_prefix "nomad-fft/v1/" {
  policy = "write"
}

# The leader lock's session, created on the Consul agent the allocator talks to.
session_prefix "" {
  policy = "write"
}
