#!/bin/bash
# Cause each failure of cases.py on one GPU and keep what torch, NCCL and torchrun print:
# bash bench/capture/run.sh [CASE...]  ->  $OUT/capture.tar.gz (one <case>.log per case, dumps,
# --log-dir tree); no argument runs every case. The cap-* fixtures are these logs as captured
# (torch 2.11.0+cu130, NCCL 2.28.9, one H200).
export PYTHONUNBUFFERED=1
C=/tmp/cap; rm -rf $C; mkdir -p $C; export CAP=$C
S=$(realpath $(dirname $0))/cases.py
TR="python3 -m torch.distributed.run --standalone"
{ nvidia-smi; nvidia-smi topo -m; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; hostname; date -u; } > $C/env.txt 2>&1
run() { name=$1; shift; echo "== $name"; ( cd $C && timeout ${T:-120} "$@" ) > $C/$name.log 2>&1; echo "rc=$?" >> $C/$name.log; tail -3 $C/$name.log; }
# Two torchrun agents on this one host stand for two nodes; each node's console is its own file.
two_nodes() {
  name=$1; shift; mkdir -p $C/$name
  for n in 0 1; do
    ( cd $C && timeout ${T:-120} env "$@" python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=1 \
        --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:29611 --rdzv_id=$name --max_restarts=0 $S peer_dies \
        > $C/$name/node$n.log 2>&1; echo "rc=$?" >> $C/$name/node$n.log ) &
    sleep 2
  done
  wait; echo "== $name"; tail -2 $C/$name/node*.log
}
case_plain() { NCCL_DEBUG=INFO run plain $TR --nproc_per_node=1 $S plain; }
case_plain_coll() { NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL,ENV run plain_coll $TR --nproc_per_node=1 $S plain; }
case_dupgpu() {
  NCCL_DEBUG=WARN run dupgpu $TR --nproc_per_node=2 $S dupgpu
  NCCL_DEBUG=INFO run dupgpu_info $TR --nproc_per_node=2 --tee 3 $S dupgpu
  mkdir -p $C/logdir; run dupgpu_logdir $TR --nproc_per_node=2 --log-dir $C/logdir --redirects 3 $S dupgpu
}
case_watchdog() { TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$C/fr_timeout_ TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$C/fr_timeout_ T=150 run watchdog $TR --nproc_per_node=1 $S watchdog; }
case_frdump() { TORCH_NCCL_TRACE_BUFFER_SIZE=2000 run frdump $TR --nproc_per_node=1 $S frdump; }
case_ima() { run ima $TR --nproc_per_node=1 $S ima; }
case_oom() { run oom $TR --nproc_per_node=1 $S oom; }
case_bad_ifname() { NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=nosuchif0 run bad_ifname $TR --nproc_per_node=1 $S plain; }
case_net_ib_forced() { NCCL_DEBUG=INFO NCCL_NET=IB run net_ib_forced $TR --nproc_per_node=1 $S plain; }
case_port_in_use() {
  python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',29533)); s.listen(); time.sleep(100)" & sleep 2
  T=60 run port_in_use python3 -m torch.distributed.run --nnodes=1 --nproc_per_node=1 --rdzv_backend=static --master_addr=127.0.0.1 --master_port=29533 --node_rank=0 $S plain
  kill %1 2>/dev/null
}
# Rank 1 (no GPU) fails before init; rank 0 waits for it in NCCL init until torchrun stops it.
case_peer_raise() { EARLY_RANK=1 NCCL_DEBUG=WARN run peer_raise $TR --nproc_per_node=2 $S peer_dies; }
case_peer_segv() { EARLY_RANK=1 EARLY=segv NCCL_DEBUG=WARN run peer_segv $TR --nproc_per_node=2 $S peer_dies; }
# Rank 0 of a two-node job fails before init; rank 1 on the other node waits for it.
case_node_peer_raise() { two_nodes node_peer_raise EARLY_RANK=0 NCCL_DEBUG=WARN; }
case_node_peer_segv() { two_nodes node_peer_segv EARLY_RANK=0 EARLY=segv NCCL_DEBUG=INFO; }
case_device_assert() { NCCL_DEBUG=WARN run device_assert $TR --nproc_per_node=1 $S device_assert; }
# A two-node job of which only one node starts: the rendezvous times out.
case_missing_node() { T=150 run missing_node python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:29622 --rdzv_conf=join_timeout=60 --max_restarts=0 $S plain; }
# Two processes on a node of one GPU, each taking the GPU of its local rank.
case_ordinal() {
  NCCL_DEBUG=WARN run ordinal $TR --nproc_per_node=2 $S ordinal
  NCCL_DEBUG=INFO run ordinal_tee $TR --nproc_per_node=2 --tee 3 $S ordinal
}
ALL="plain plain_coll dupgpu watchdog frdump ima oom bad_ifname net_ib_forced port_in_use peer_raise peer_segv node_peer_raise node_peer_segv device_assert missing_node ordinal"
for c in ${@:-$ALL}; do case_$c; done
ls -laR $C
cd /tmp && tar czf ${OUT:-/tmp}/capture.tar.gz cap
