defmodule Grove.ReloaderSweepTest do
  @moduledoc """
  The reloader's periodic look: the times of the files saved in the last
  ten minutes are read at every look, those of the others one look in
  `:sweep`, each in turn, so a change to any file is seen within `:sweep`
  looks while a look reads a few files, not all of them.
  """
  use ExUnit.Case, async: true

  alias Grove.Reloader

  # A change the reloader sees but cannot load (no world runs) is logged.
  @moduletag :capture_log

  @hour 3600

  test "a file saved in the last ten minutes is due at every look, any other at one look in a sweep" do
    now = System.os_time(:second)

    for n <- 1..200, sweep <- [1, 2, 5, 7] do
      file = "/src/lib/file_#{n}.ex"

      looks =
        for look <- 0..(3 * sweep - 1), do: Reloader.due?(file, now - @hour, now, {look, sweep})

      # Exactly one look in every `sweep` in a row, the same one each time.
      for window <- Enum.chunk_every(looks, sweep, 1, :discard),
          do: assert(Enum.count(window, & &1) == 1)

      for look <- 0..(3 * sweep - 1),
          do: assert(Reloader.due?(file, now - 30, now, {look, sweep}))
    end
  end

  test "a periodic look reads a file untouched for long only at its turn, and sees its change then" do
    dir = Path.join(System.tmp_dir!(), "grove-sweep-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf(dir) end)
    old = System.os_time(:second) - @hour

    files =
      for n <- 1..8 do
        file = Path.join(dir, "cold_#{n}.ex")
        File.write!(file, "# #{n}\n")
        File.touch!(file, old)
        file
      end

    # The directory's own time too, so it is not walked again at every look.
    File.touch!(dir, old)
    sweep = 4

    {:ok, reloader} =
      Reloader.start_link(
        instance: :"no_such_instance_#{System.unique_integer([:positive])}",
        paths: [dir],
        compile: :files,
        interval: 3_600_000,
        sweep: sweep
      )

    on_exit(fn -> if Process.alive?(reloader), do: GenServer.stop(reloader) end)

    [file | _] = files
    before = :sys.get_state(reloader).files[file]
    File.write!(file, "# changed\n")

    # Looks 0 to sweep - 1: the change is seen at the file's turn, not before.
    seen =
      for look <- 0..(sweep - 1) do
        send(reloader, :check)
        state = :sys.get_state(reloader)
        assert state.looks == look + 1
        changed = state.files[file] != before
        due = Reloader.due?(file, elem(before, 0), System.os_time(:second), {look, sweep})
        {look, due, changed}
      end

    turn = Enum.find(seen, fn {_look, due, _changed} -> due end)
    assert turn != nil

    for {look, due, changed} <- seen do
      if look < elem(turn, 0), do: refute(changed), else: assert(changed)
      if look == elem(turn, 0), do: assert(due)
    end
  end
end
