# What waking a zone and putting it to sleep costs the core, whole: a
# world of a million cells a side in zones of 50, on demand, with the
# orchard and the default ground (seed 1), no store; 400 zones spread
# over it woken one after the other (`Zone.wake/2`, then `Zone.recovered/2`:
# its ground made, its game's layer laid, its tables filled), then all
# put to sleep (`World.sleep_idle/2`); three rounds of other zones. The
# VM's CPU time (`:erlang.statistics(:runtime)`) per zone, so run it with
# one scheduler, from the checkout to measure, and the reductions of all
# its processes (`:erlang.statistics(:exact_reductions)`) per zone woken,
# a count of calls the machine's speed does not move (not a cost: a call
# inlined is one fewer, a draw costs as much as many):
#
#     cd lab && elixir --erl "+S 1:1" -S mix run --no-start bench/zone_wake.exs

alias Grove.Bench.ZoneWakeWorld
alias Grove.World
alias Grove.World.Zone

name = :bench_zone_wake
{sup, world} = ZoneWakeWorld.start(name)
grid = world.grid
count = 400

rounds =
  for round <- 1..3 do
    zones = ZoneWakeWorld.zones(grid, round, count)

    {_, _} = :erlang.statistics(:runtime)
    {_, _} = :erlang.statistics(:exact_reductions)

    for index <- zones do
      Zone.wake(world, index)
      Zone.recovered(world, index)
    end

    {_, wake_ms} = :erlang.statistics(:runtime)
    {_, wake_reductions} = :erlang.statistics(:exact_reductions)
    World.sleep_idle(name, 600_000)
    {_, sleep_ms} = :erlang.statistics(:runtime)
    # They linger for the handoff timeout, then stop.
    Process.sleep(200)
    {wake_ms * 1000 / count, sleep_ms * 1000 / count, div(wake_reductions, count)}
  end

Supervisor.stop(sup)

IO.puts(
  "CPU us per zone, 3 rounds of #{count}: woken #{inspect(Enum.map(rounds, &elem(&1, 0)))}, " <>
    "put to sleep #{inspect(Enum.map(rounds, &elem(&1, 1)))}; " <>
    "reductions per zone woken #{inspect(Enum.map(rounds, &elem(&1, 2)))}"
)
