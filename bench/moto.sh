# Sourced by the S3 benchmarks: `start_moto PORT LOG` starts moto_server ($MOTO) on PORT,
# logging to LOG, stops it when the script exits, creates the bucket `bench` and exports the
# AWS environment that points graphflat at it.
start_moto() {
  "$MOTO" -H 127.0.0.1 -p "$1" > "$2" 2>&1 &
  MOTO_PID=$!
  trap 'kill $MOTO_PID 2>/dev/null' EXIT
  until curl -s -o /dev/null "http://127.0.0.1:$1"; do sleep 0.2; done
  curl -s -X PUT "http://127.0.0.1:$1/bench" > /dev/null
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
  export AWS_ENDPOINT=http://127.0.0.1:$1 AWS_ALLOW_HTTP=true AWS_EC2_METADATA_DISABLED=true
}
