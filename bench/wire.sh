# Sourced by the benchmark scripts that run 2 processes over a limited wire: two network
# namespaces ${TAG}a and ${TAG}b (10.78.0.1 and .2) joined by a veth pair limited to $RATE each
# way (tc tbf). Needs root. `wire_up` makes them, `wire_down` removes them (set as an EXIT trap).
# Run a process in one with `ip netns exec ${TAG}a CMD`.

wire_up() {
  ip netns add ${TAG}a && ip netns add ${TAG}b
  ip link add ${TAG}va netns ${TAG}a type veth peer name ${TAG}vb netns ${TAG}b
  local i=1
  for s in a b; do
    ip -n ${TAG}$s addr add 10.78.0.$i/24 dev ${TAG}v$s
    ip -n ${TAG}$s link set ${TAG}v$s up
    ip -n ${TAG}$s link set lo up
    tc -n ${TAG}$s qdisc add dev ${TAG}v$s root tbf rate "$RATE" burst 256kb latency 50ms
    i=2
  done
}

wire_down() { ip netns del ${TAG}a 2> /dev/null || true; ip netns del ${TAG}b 2> /dev/null || true; }
