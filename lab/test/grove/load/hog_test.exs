defmodule Grove.Load.HogTest do
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.Load.Hog

  # The hogs here sleep rather than spin: the tests are about their lives.
  @quiet [command: "exec sleep 600"]

  defp alive?(os_pid) do
    case File.read("/proc/#{os_pid}/stat") do
      {:ok, stat} -> not (stat |> String.split(") ") |> List.last() |> String.starts_with?("Z"))
      {:error, _} -> false
    end
  end

  test "hogs run as other OS processes until stopped" do
    hog = Hog.start(2, @quiet)
    assert [a, b] = hog.os_pids
    assert a != b and a != String.to_integer(System.pid())
    assert alive?(a) and alive?(b)

    :ok = Hog.stop(hog)
    eventually(fn -> refute alive?(a) or alive?(b) end)
  end

  test "hogs die with the process that started them, whatever its end" do
    test = self()

    owner =
      spawn(fn ->
        send(test, {:hog, Hog.start(1, @quiet)})
        receive(do: (:never -> :ok))
      end)

    assert_receive {:hog, %Hog{os_pids: [os_pid]}}, 5000
    assert alive?(os_pid)
    Process.exit(owner, :kill)
    eventually(fn -> refute alive?(os_pid) end)
  end

  test "a plan starts hogs from its start and cancelling it ends them" do
    plan = Hog.plan(1, [from: 0] ++ @quiet)
    eventually(fn -> assert Hog.on?(plan) end)
    [os_pid] = hog_pids(plan)
    assert alive?(os_pid)

    :ok = Hog.cancel(plan)
    refute Hog.on?(plan)
    eventually(fn -> refute alive?(os_pid) end)
  end

  # The OS processes whose parent is one of the plan's shells.
  defp hog_pids(%{pid: pid}) do
    {:links, links} = Process.info(pid, :links)

    for port <- links, is_port(port), {:os_pid, shell} = Port.info(port, :os_pid) do
      {children, 0} = System.cmd("pgrep", ["-P", Integer.to_string(shell)])
      children |> String.trim() |> String.to_integer()
    end
  end
end
