defmodule Grove.SessionConfig do
  @moduledoc """
  The config of a player's session (`Grove.Gateway.Session.new/4`)
  driven by hand, with no connection or gateway around it: frames up to
  4 KB, a viewport of radius 16 at most, moves and errors that never run
  into a limit, nothing counted. The tests' and the lab's benches' (the
  lab compiles this folder too).
  """

  @doc "The config, as `Grove.Gateway.Session.new/4` takes it."
  @spec loose() :: map()
  def loose do
    %{
      max_frame: 4096,
      move_rate: 1000,
      move_burst: 1000,
      max_errors: 1000,
      max_view_radius: 16,
      spawn: nil,
      tick_ms: 100,
      view_ms: 1000,
      stats: nil,
      move_time: nil,
      accounts: nil
    }
  end
end
