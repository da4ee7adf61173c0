"""The DDP doctor's command line: python tools/ddp_doctor.py train.py (--help for the rest).

The doctor itself is the package beside this file, tools/ddp_doctor/ (the driver, the program model, the
rules by family); this file keeps the documented command working. Run as a script, Python puts tools/ on
the path, and `import ddp_doctor` finds the package (a package wins over a module of the same name).
"""


from ddp_doctor.driver import hard_exit, main

if __name__ == "__main__":
    hard_exit(main(exiting=True))
