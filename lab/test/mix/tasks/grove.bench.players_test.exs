defmodule Mix.Tasks.Grove.Bench.PlayersTest do
  use ExUnit.Case, async: true

  alias Mix.Tasks.Grove.Bench.Players

  # A bench of a join storm may want its players to give up at the first
  # refusal, or to try again more often than the load's default.
  test "the load is given the players' retries when asked, and its own default otherwise" do
    args = Players.load_args([retries: 0], 4000, 123)
    assert ["--retries", "0"] == Enum.drop_while(args, &(&1 != "--retries")) |> Enum.take(2)
    assert "ws://127.0.0.1:4000/ws" in args
    refute "--retries" in Players.load_args([], 4000, 123)
  end
end
